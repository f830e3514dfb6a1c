#include "runtime/batch_plan.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace murmur::runtime {

BatchPlan::BatchPlan(const TrainConfig& train, std::int64_t samples_per_peer) {
  if (samples_per_peer < 1)
    throw ConfigError(fmt::format("train: {} samples per peer; needs at least 1",
                                  samples_per_peer));
  const BatchRampConfig& ramp = train.batch_ramp;
  const int epochs = std::max(1, train.epochs);
  const int every = std::max(1, ramp.every_epochs);
  starts_.push_back(0);
  for (int e = 0; e < epochs; ++e) {
    double b = train.batch_size * std::pow(ramp.factor, e / every);
    if (ramp.max_batch > 0) b = std::min<double>(b, std::max(ramp.max_batch, train.batch_size));
    // No batch beyond the epoch itself: a larger one would only repeat samples within a step.
    b = std::min<double>(b, static_cast<double>(std::max<std::int64_t>(
                                samples_per_peer, train.batch_size)));
    const int batch = static_cast<int>(std::lround(b));
    batches_.push_back(batch);
    max_batch_ = std::max(max_batch_, batch);
    starts_.push_back(starts_.back() + (samples_per_peer + batch - 1) / batch);
  }
}

std::size_t BatchPlan::epoch_index(std::int64_t step) const {
  const auto it = std::upper_bound(starts_.begin(), starts_.end() - 1, step);
  return static_cast<std::size_t>(std::distance(starts_.begin(), it) - 1);
}

int BatchPlan::batch_at(std::int64_t step) const { return batches_[epoch_index(step)]; }

double BatchPlan::epoch_at(std::int64_t step) const {
  if (step >= total_steps()) {
    // Past the plan (not reached by a run): count on at the last epoch's pace.
    const std::int64_t last = starts_.back() - starts_[starts_.size() - 2];
    return static_cast<double>(batches_.size()) +
           static_cast<double>(step - total_steps()) / static_cast<double>(last);
  }
  const std::size_t e = epoch_index(step);
  const double len = static_cast<double>(starts_[e + 1] - starts_[e]);
  return static_cast<double>(e) + static_cast<double>(step - starts_[e]) / len;
}

bool BatchPlan::ends_epoch(std::int64_t step) const {
  return step > 0 && std::binary_search(starts_.begin() + 1, starts_.end(), step);
}

}  // namespace murmur::runtime
