// DiLoCo (`diloco`, Douillard et al. 2023, "DiLoCo: Distributed Low-Communication Training of
// Language Models"): each peer runs the inner (local) optimizer for H = algorithm.local_steps
// steps; then the peers average their models exactly, and an outer optimizer, SGD with Nesterov
// momentum (outer_lr, outer_momentum), steps the global model along the averaged
// pseudo-gradient. Keeps the global model and the outer momentum as resume state.
// Not thread-safe.
#pragma once

#include <vector>

#include "optimizers/allreduce.h"

namespace murmur::optimizers {

class Diloco final : public Averaging {
 public:
  // The global model starts as the current parameters (the same on every peer at step 0).
  explicit Diloco(const AveragingContext& ctx);
  void after_step(std::int64_t step) override;
  std::vector<std::pair<std::string, std::span<float>>> state() override;
  std::int64_t live_clock(std::int64_t step) const override { return step / local_steps_; }

 private:
  int local_steps_;
  float outer_lr_, outer_momentum_;
  std::span<float> params_;
  ExactAverage average_;
  std::vector<float> global_;    // theta^(t-1): the model every outer step starts from
  std::vector<float> momentum_;  // the outer Nesterov buffer
};

}  // namespace murmur::optimizers
