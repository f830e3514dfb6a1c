// Local SGD and post-local SGD (`local_sgd`, Lin et al. 2020, "Don't use large mini-batches,
// use local SGD"): before algorithm.switch_step the peers average exactly after every step
// (plain data-parallel SGD); from then on they take H = algorithm.local_steps local steps
// between exact averages. switch_step = 0 is plain local SGD. Not thread-safe.
#pragma once

#include "optimizers/allreduce.h"

namespace murmur::optimizers {

extern const AlgorithmInfo kLocalSgd;

class LocalSgd final : public Averaging {
 public:
  explicit LocalSgd(const AveragingContext& ctx);
  void after_step(std::int64_t step) override;

 private:
  int local_steps_;
  std::int64_t switch_step_;
  ExactAverage average_;
};

}  // namespace murmur::optimizers
