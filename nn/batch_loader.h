// Hands out mini-batches of one peer's shard, reshuffled at the start of every epoch. Holds a
// reference to the Dataset, which must outlive it. Not thread-safe: one loader per consumer.
// Deterministic in the seed, and resumable exactly from state() (saved in checkpoints).
#pragma once

#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "nn/dataset.h"

namespace murmur::nn {

class BatchLoader {
 public:
  // Throws DataError if `indices` is empty or holds an index outside the data set, and
  // ConfigError if batch_size < 1.
  BatchLoader(const Dataset& data, std::vector<std::int64_t> indices, int batch_size,
              std::uint64_t seed);

  // Copies the next batch into x (batch_size * sample_floats floats, NCHW) and labels
  // (batch_size), and returns how many samples it filled: batch_size, or fewer for the last
  // batch of an epoch (kept, as PyTorch's drop_last=False). After that last batch the next
  // epoch starts, reshuffled. No allocation.
  int next(float* x, std::int32_t* labels);

  // Completed epochs: the epoch the next batch comes from.
  std::int64_t epoch() const { return epoch_; }
  std::int64_t batches_per_epoch() const;
  int batch_size() const { return batch_size_; }
  // From the next batch on (a growing batch, train.batch_ramp); the caller's buffers must hold
  // the new size. Throws ConfigError if batch_size < 1.
  void set_batch_size(int batch_size);
  std::int64_t size() const { return static_cast<std::int64_t>(indices_.size()); }

  // Where the loader stands: the epoch, the position in that epoch's order, and the Rng state
  // from which that epoch's order was drawn (so restore() re-draws the same order).
  struct State {
    std::int64_t epoch = 0;
    std::int64_t position = 0;
    Rng::State rng{};
  };
  State state() const;
  // Continues exactly where `state` was taken, on a loader built with the same data, indices and
  // batch size. Throws CheckpointError if the position does not fit this shard.
  void restore(const State& state);

 private:
  void start_epoch();  // draws order_ from indices_ with rng_, recording epoch_rng_ first

  const Dataset& data_;
  std::vector<std::int64_t> indices_;
  std::vector<std::int64_t> order_;  // this epoch's permutation of indices_
  int batch_size_;
  Rng rng_;
  Rng::State epoch_rng_{};
  std::int64_t epoch_ = 0;
  std::int64_t position_ = 0;
};

}  // namespace murmur::nn
