// The per-peer batch size of every epoch of a run, and the step at which each epoch starts: a
// constant train.batch_size, or one that grows by train.batch_ramp (Smith et al. 2018, "Don't
// Decay the Learning Rate, Increase the Batch Size"). Every peer computes the same plan from
// the config, so all take the same number of steps. Immutable; any thread may read it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/config.h"

namespace murmur::runtime {

class BatchPlan {
 public:
  // An epoch is samples_per_peer samples (the whole data set over the peers), in batches of
  // that epoch's size. Throws ConfigError if samples_per_peer < 1.
  BatchPlan(const TrainConfig& train, std::int64_t samples_per_peer);

  // The batch of 0-based step `step` (the last epoch's for a step past the end).
  int batch_at(std::int64_t step) const;
  // The largest batch of the run: what the input buffers must hold.
  int max_batch() const { return max_batch_; }
  // Steps over all train.epochs epochs (max_steps not applied).
  std::int64_t total_steps() const { return starts_.back(); }
  // Epochs done after `step` steps, fractional within an epoch.
  double epoch_at(std::int64_t step) const;
  // True iff `step` (> 0) steps end an epoch.
  bool ends_epoch(std::int64_t step) const;
  // Each epoch's batch, in order.
  const std::vector<int>& batches() const { return batches_; }

 private:
  // The epoch `step` falls in: the last one for a step past the end.
  std::size_t epoch_index(std::int64_t step) const;

  std::vector<int> batches_;            // per epoch
  std::vector<std::int64_t> starts_;    // epochs + 1 entries: the first step of each, then total
  int max_batch_ = 1;
};

}  // namespace murmur::runtime
