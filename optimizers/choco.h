// CHOCO-SGD (`choco`, Koloskova et al. 2019, "Decentralized Stochastic Optimization and Gossip
// Algorithms with Compressed Communication"): gossip of compressed differences. Each peer keeps
// x_i, its public copy x^_i (what its neighbors know of it) and s_i = sum_j W_ij x^_j; it sends
// only Q(x_i - x^_i), so the compression error is carried in x - x^ and sent later (error
// compensation). Needs a static graph with doubly stochastic W. x^ and s live on the peer's
// device; the compressors run on the host (compressor.h), so on a GPU the difference is
// downloaded before encoding and the decoded sums uploaded after. Not thread-safe.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "optimizers/algorithm.h"
#include "optimizers/compressor.h"
#include "optimizers/recv_slots.h"
#include "topology/mixing.h"
#include "transport/tag.h"

namespace murmur::optimizers {

extern const AlgorithmInfo kChoco;

class Choco final : public Averaging {
 public:
  // x^ and s start at 0, as in the paper.
  explicit Choco(const AveragingContext& ctx);
  void after_step(std::int64_t step) override;
  std::vector<std::pair<std::string, std::span<float>>> state() override;

 private:
  // target += sum_k scale_k decode(message_k), on the device.
  void add_decoded(std::span<float> target,
                   std::span<const std::pair<std::span<const std::byte>, float>> messages);

  membership::Neighborhood& hood_;
  device::Device& device_;
  std::span<float> params_;
  int local_steps_;
  float gamma_;
  unsigned purpose_;
  transport::TagLayout layout_;
  topology::RankMixing mixing_;
  std::unique_ptr<Compressor> compressor_;
  float contraction_;
  Rng rng_;
  device::Array xhat_, s_, diff_;
  std::vector<std::byte> send_;
  std::unique_ptr<transport::Region> send_region_;
  RecvSlots slots_;  // host memory: the messages are compressed bytes of any length
  // Off-host devices only: the difference and the decoded sums on their way through the host.
  std::vector<float> host_;
  device::Array decoded_;
};

}  // namespace murmur::optimizers
