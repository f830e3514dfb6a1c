// CHOCO-SGD (`choco`, Koloskova et al. 2019, "Decentralized Stochastic Optimization and Gossip
// Algorithms with Compressed Communication"): gossip of compressed differences. Each peer keeps
// x_i, its public copy x^_i (what its neighbors know of it) and s_i = sum_j W_ij x^_j; it sends
// only Q(x_i - x^_i), so the compression error is carried in x - x^ and sent later (error
// compensation). Needs a static graph with doubly stochastic W. x^ and s live on the peer's
// device; the compressors run on the host (compressor.h), so on a GPU the difference is
// downloaded before encoding and the decoded sums uploaded after.
//
// Lost and rejoining neighbors (run.on_peer_failure: continue): each peer also keeps every
// in-neighbor's public copy apart (as Koloskova et al.'s code does), so that s can change with
// the graph. A neighbor that stops taking part leaves s: its term W_ik x^_k is replaced by
// W_ik x^_i, its weight going to this peer's own, as D-PSGD renormalizes its rows (W stays
// symmetric and doubly stochastic over the live ranks of an undirected graph, so their mean is
// kept). A neighbor that takes part again (a rejoin's join step, or the first round after a
// resume) swaps full public copies with this peer at that round (tag purpose kJoinState) and
// its term goes back into s. Not thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>
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

// The consensus step under which Koloskova et al. 2019 (Theorem 2) prove CHOCO-Gossip converges
// linearly, for a compressor of contraction delta (Compressor::delta) and a symmetric doubly
// stochastic W of spectral gap rho = 1 - |lambda_2| and beta = ||I - W||_2:
// gamma* = rho^2 delta / (16 rho + rho^2 + 4 beta^2 + 2 rho beta^2 - 8 rho delta).
// A sufficient bound, far below what runs well in practice (top-10% on a ring of 4: 0.0024,
// where 0.2 converges), but a compressor far past it can diverge: unbucketed qsgd's delta of
// 0.021 on the MLP gives 0.00046, and gamma 0.2 ran to NaN.
struct ChocoBound {
  double spectral_gap = 1, beta = 0, gamma = 1;
};
ChocoBound choco_gamma_bound(double delta, const topology::MixingMatrix& w);

class Choco final : public Averaging {
 public:
  // x^ and s start at 0, as in the paper.
  explicit Choco(const AveragingContext& ctx);
  void after_step(std::int64_t step) override;
  // The restarted peer's parameters are its neighbors' mean: its public copy, s and its copies of
  // the neighbors' start from them, every neighbor out of s until its join step.
  void rejoined() override;
  std::vector<std::pair<std::string, std::span<float>>> state() override;
  std::map<std::string, std::string> scalars() const override;
  // Also arms the swap of public copies with every neighbor at the first round: a checkpoint's
  // copies can predate a neighbor's (it was restarted, or an edge was out).
  void restore_scalars(const std::map<std::string, std::string>& scalars) override;

 private:
  // target += sum_k scale_k decode(message_k), on the device.
  void add_decoded(std::span<float> target,
                   std::span<const std::pair<std::span<const std::byte>, float>> messages);
  // The edges that take part from this round on (they did not at `before`, the last exchange
  // step; all of them after a resume) swap full public copies; each one's term goes into s.
  void hand_over(std::int64_t step, std::int64_t before, std::int64_t round);
  // In-neighbor k's term leaves s (it no longer takes part); its weight becomes this peer's.
  void leave(std::size_t k);
  // W_ii plus the weights of the in-neighbors out of s.
  float self_weight() const;

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
  // Per in-neighbor k (mixing_.recv_from[k]): its public copy x^_k as this peer holds it, and
  // whether W_ik x^_k is in s_ (the weight of those that are not is this peer's own).
  std::vector<device::Array> copies_;
  std::vector<char> in_s_;
  bool resync_ = false;  // swap public copies with every neighbor at the next round (resumed)
  std::unique_ptr<transport::Region> xhat_region_;  // the swap's send buffer, made at its first
  std::unique_ptr<RecvSlots> join_slots_;           // and its receive buffers (device memory)
  std::vector<std::byte> send_;
  std::unique_ptr<transport::Region> send_region_;
  RecvSlots slots_;  // host memory: the messages are compressed bytes of any length
  // Off-host devices only: the difference and the decoded sums on their way through the host.
  std::vector<float> host_;
  device::Array decoded_;
};

}  // namespace murmur::optimizers
