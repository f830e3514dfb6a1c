// DiLoCo (`diloco`, Douillard et al. 2023, "DiLoCo: Distributed Low-Communication Training of
// Language Models"): each peer runs the inner (local) optimizer for H = algorithm.local_steps
// steps; then the peers average their models exactly, and an outer optimizer, SGD with Nesterov
// momentum (outer_lr, outer_momentum), steps the global model along the averaged
// pseudo-gradient. Keeps the global model and the outer momentum (device arrays) as resume
// state. A round whose average the survivors of a death skipped is no outer step: the inner
// steps go on, and the next round's pseudo-gradient covers both. A restarted peer rejoins at an
// agreed round (RejoinPolicy::kAgreed); at that round the peers that were there hand it their
// global model and momentum (one weighted average, before the round's own). Not thread-safe.
#pragma once

#include "optimizers/allreduce.h"

namespace murmur::optimizers {

extern const AlgorithmInfo kDiloco;

class Diloco final : public Averaging {
 public:
  // The global model starts as the current parameters (the same on every peer at step 0).
  explicit Diloco(const AveragingContext& ctx);
  void after_step(std::int64_t step) override;
  std::vector<std::pair<std::string, std::span<float>>> state() override;
  // Until its join round the restarted peer steps alone from its neighbors' parameters.
  void rejoined() override;
  std::int64_t live_clock(std::int64_t step) const override { return step / local_steps_; }

 private:
  // At a round where a rank rejoins: global_ and momentum_ become those of the ranks that were
  // there (every rank computes the same bits).
  void hand_over(std::int64_t round);

  membership::Neighborhood& hood_;
  device::Device& device_;
  int local_steps_;
  float outer_lr_, outer_momentum_;
  std::span<float> params_;
  ExactAverage average_;
  device::Array global_;    // theta^(t-1): the model every outer step starts from
  device::Array momentum_;  // the outer Nesterov buffer
  device::Array delta_;     // scratch: the averaged pseudo-gradient
  device::Array join_;      // at a join round: [w global, w momentum, w], w = 1 if there before
  std::unique_ptr<transport::Region> join_region_;  // made at the first join round
};

}  // namespace murmur::optimizers
