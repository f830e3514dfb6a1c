// CHOCO-SGD (`choco`, Koloskova et al. 2019, "Decentralized Stochastic Optimization and Gossip
// Algorithms with Compressed Communication"): gossip of compressed differences. Each peer keeps
// x_i, its public copy x^_i (what its neighbors know of it) and s_i = sum_j W_ij x^_j; it sends
// only Q(x_i - x^_i), so the compression error is carried in x - x^ and sent later (error
// compensation). Needs a static graph with doubly stochastic W. Not thread-safe.
#pragma once

#include <memory>
#include <vector>

#include "core/rng.h"
#include "optimizers/averaging.h"
#include "optimizers/comm_thread.h"
#include "optimizers/compressor.h"

namespace murmur::optimizers {

class Choco final : public Averaging {
 public:
  // x^ and s start at 0, as in the paper.
  explicit Choco(const AveragingContext& ctx);
  void after_step(std::int64_t step) override;
  std::vector<std::pair<std::string, std::span<float>>> state() override;

 private:
  transport::Transport& transport_;
  std::span<float> params_;
  int local_steps_;
  float gamma_;
  transport::CollectiveOptions options_;
  topology::RankMixing mixing_;
  std::unique_ptr<Compressor> compressor_;
  float contraction_;
  Rng rng_;
  std::vector<float> xhat_, s_, diff_;
  std::vector<std::byte> send_;
  std::unique_ptr<transport::Region> send_region_;
  RecvSlots slots_;
};

}  // namespace murmur::optimizers
