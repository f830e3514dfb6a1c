#include "nn/batch_loader.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"

namespace murmur::nn {

BatchLoader::BatchLoader(const Dataset& data, std::vector<std::int64_t> indices, int batch_size,
                         std::uint64_t seed)
    : data_(data), indices_(std::move(indices)), rng_(seed) {
  set_batch_size(batch_size);
  if (indices_.empty()) throw DataError("batch loader: this peer's shard is empty");
  for (std::int64_t i : indices_)
    if (i < 0 || i >= data_.size)
      throw DataError(
          fmt::format("batch loader: index {} outside the data set of {} samples", i, data_.size));
  order_.resize(indices_.size());
  start_epoch();
}

void BatchLoader::start_epoch() {
  epoch_rng_ = rng_.state();
  // Each epoch permutes the original index list (not the previous order), so an epoch's order
  // depends only on the Rng state recorded above: that is what makes restore() exact.
  std::copy(indices_.begin(), indices_.end(), order_.begin());
  for (std::size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[rng_.below(i)]);
  position_ = 0;
}

void BatchLoader::set_batch_size(int batch_size) {
  if (batch_size < 1)
    throw ConfigError(fmt::format("train.batch_size: {} must be >= 1", batch_size));
  batch_size_ = batch_size;
}

std::int64_t BatchLoader::batches_per_epoch() const {
  return (size() + batch_size_ - 1) / batch_size_;
}

int BatchLoader::next(float* x, std::int32_t* labels) {
  const std::int64_t n = std::min<std::int64_t>(batch_size_, size() - position_);
  const std::int64_t floats = data_.sample_floats();
  const std::size_t bytes = static_cast<std::size_t>(floats) * sizeof(float);
  const std::int64_t* order = order_.data() + position_;
  for (std::int64_t j = 0; j < n; ++j) {
    std::memcpy(x + j * floats, data_.image(order[j]), bytes);
    labels[j] = data_.labels[order[j]];
  }
  position_ += n;
  if (position_ == size()) {
    ++epoch_;
    start_epoch();
  }
  return static_cast<int>(n);
}

BatchLoader::State BatchLoader::state() const { return {epoch_, position_, epoch_rng_}; }

void BatchLoader::restore(const State& state) {
  if (state.epoch < 0 || state.position < 0 || state.position >= size())
    throw CheckpointError(
        fmt::format("batch loader state: epoch {} position {} does not fit a shard of {} samples",
                    state.epoch, state.position, size()));
  rng_.set_state(state.rng);
  start_epoch();
  epoch_ = state.epoch;
  position_ = state.position;
}

}  // namespace murmur::nn
