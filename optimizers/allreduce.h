// The exact-average algorithms, built on the Neighborhood's exact average of the parameter arena
// (a ring allreduce; over the survivors in continue mode):
// - ExactAverage: the shared helper (one tag purpose, timing);
// - AllreduceAveraging (`allreduce`): every step (every H steps with local_steps = H), the
//   baseline that every decentralized paper compares with.
// Local SGD and DiLoCo (local_sgd.h, diloco.h) use ExactAverage too. Not thread-safe.
#pragma once

#include <cstdint>
#include <span>

#include "optimizers/algorithm.h"
#include "transport/tag.h"

namespace murmur::optimizers {

extern const AlgorithmInfo kAllreduce;

class ExactAverage {
 public:
  explicit ExactAverage(const AveragingContext& ctx);
  // Replaces the parameters on every rank by their mean (bitwise the same on every rank). Every
  // rank calls it with the same round. Returns the seconds it took. A round whose average the
  // survivors skipped while agreeing on a new ring leaves the parameters as they were.
  double run(std::int64_t round);
  // False iff the last run()'s round was skipped (the parameters are this rank's own).
  bool averaged() const { return averaged_; }

 private:
  membership::Neighborhood& hood_;
  transport::Region& region_;
  std::span<float> params_;
  unsigned purpose_;
  transport::TagLayout layout_;
  bool averaged_ = true;
};

class AllreduceAveraging final : public Averaging {
 public:
  explicit AllreduceAveraging(const AveragingContext& ctx);
  // Averages after every local_steps-th step.
  void after_step(std::int64_t step) override;
  std::int64_t live_clock(std::int64_t step) const override { return step / local_steps_; }

 private:
  int local_steps_;
  ExactAverage average_;
};

}  // namespace murmur::optimizers
