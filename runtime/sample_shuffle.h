// GossipGraD's asynchronous distributed sample shuffle (Daily et al. 2018, "GossipGraD:
// Scalable Deep Learning using Gossip Communication based Asynchronous Gradient Descent"):
// a peer whose shard holds few classes (a Dirichlet split) learns a model biased to them, and
// gossip averages the bias away only slowly. Trading samples makes the shards alike over time.
// Every data.shuffle.every_steps steps (by default once an epoch) each peer sends k samples of
// its shard (k = data.shuffle.fraction of the smallest shard, the same on every peer) to the
// peer 2^(round mod ceil(log2 P)) ranks on, receives k from the peer as far back, and trains
// on those in place of the ones it sent. The trade runs while the next step computes: it is
// posted after a step and lands after the next one (waited for there if it has not arrived).
// Landing at a fixed step, not whenever the bytes happen to arrive, keeps a run reproducible
// and its resume exact. A message carries the samples themselves
// (images, labels, their index in the data set for the checkpoint) behind a header with a
// CRC32C; its size, magic, count, CRC, labels and indices are checked before a byte is used.
// The peer's shard is a local copy of its samples, which the batch loader reads and the trades
// overwrite between steps. Driven by the training thread, which must be the only one using the
// transport (no algorithm.overlap, adpsgd or pairwise). Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/config.h"
#include "nn/dataset.h"
#include "transport/transport.h"

namespace murmur::runtime {

class SampleShuffle {
 public:
  // `shard`: this rank's sample indices into `data` (partition_indices); `smallest`: the size of
  // the smallest shard of any rank (k is a fraction of it, so every shard can give k).
  // `steps_per_epoch` sets the default period. Throws ConfigError for a config it cannot run.
  SampleShuffle(const nn::Dataset& data, const std::vector<std::int64_t>& shard,
                std::int64_t smallest, const ExperimentConfig& config, int rank,
                std::int64_t steps_per_epoch);
  ~SampleShuffle();

  // The shard as the loader reads it: samples 0 .. size-1 of this data set.
  const nn::Dataset& local() const { return local_; }
  std::vector<std::int64_t> local_indices() const;
  // Which sample of the whole data set each local one is (for the checkpoint).
  const std::vector<std::int64_t>& origin() const { return origin_; }
  // Rebuilds the shard from `origin` (a checkpoint's). Throws CheckpointError if it does not fit.
  void restore(const std::vector<std::int64_t>& origin);

  // Called by every peer after each step: lands the trade posted after the step before (waiting
  // for it if need be), and at a round posts the round's trade. Throws PeerLost if a partner
  // does not answer within `timeout`, ProtocolError naming the sender for a malformed message.
  void after_step(transport::Transport& transport, std::int64_t step, std::chrono::milliseconds timeout);
  // Waits for the trade in flight, if any (before a checkpoint, at the end).
  void complete(transport::Transport& transport, std::chrono::milliseconds timeout);

  std::int64_t per_round() const { return k_; }
  std::int64_t every_steps() const { return every_; }
  // Samples received so far.
  std::int64_t received() const { return received_; }

 private:
  void post(transport::Transport& transport, std::int64_t round);
  void apply(transport::Transport& transport);  // checks the message and overwrites the rows

  const nn::Dataset& data_;
  nn::Dataset local_;
  std::vector<std::int64_t> origin_;
  int rank_, world_;
  std::uint64_t seed_;
  std::int64_t k_, every_;
  std::int64_t received_ = 0;
  // The trade in flight: its round, the rows it replaces, the partner it hears from, buffers.
  bool pending_ = false;
  std::int64_t round_ = 0;
  int from_ = 0;
  std::vector<std::int64_t> rows_;
  std::vector<std::byte> out_, in_;
  std::unique_ptr<transport::Region> out_region_, in_region_;
  transport::Request send_, recv_;
};

// The size of a trade's message of `k` samples of `sample_floats` floats each.
std::size_t shuffle_message_bytes(std::int64_t k, std::int64_t sample_floats);

}  // namespace murmur::runtime
