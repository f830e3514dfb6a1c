// The exact-average algorithms, built on one ring allreduce of the parameter arena:
// - ExactAverage: the shared helper (a RingAllreduce with its scratch kept between rounds);
// - AllreduceAveraging (`allreduce`): every step (every H steps with local_steps = H), the
//   baseline that every decentralized paper compares with.
// Local SGD and DiLoCo (local_sgd.h, diloco.h) use ExactAverage too. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "optimizers/averaging.h"
#include "optimizers/comm_thread.h"
#include "optimizers/live_allreduce.h"
#include "transport/collectives.h"

namespace murmur::optimizers {

class ExactAverage {
 public:
  explicit ExactAverage(const AveragingContext& ctx);
  // Replaces the parameters on every rank by their mean (bitwise the same on every rank).
  // Every rank calls it with the same (purpose, round). Returns the seconds it took. With a
  // LiveSet the mean is over the live ranks (LiveAllreduce), and a round whose average the
  // survivors skipped while agreeing on a new ring leaves the parameters as they were.
  double run(ReducePurpose purpose, std::int64_t round);

 private:
  transport::Region& region_;
  std::span<float> params_;
  transport::RingAllreduce allreduce_;
  std::unique_ptr<LiveAllreduce> live_;  // run.on_peer_failure=continue only
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
