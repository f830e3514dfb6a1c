#include "optimizers/choco.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <sstream>

#include "core/error.h"
#include "core/logging.h"
#include "core/stopwatch.h"
#include "optimizers/device_arrays.h"
#include "optimizers/exchange.h"
#include "topology/mixing.h"
#include "topology/spectral.h"

namespace murmur::optimizers {

namespace {
constexpr std::string_view kKeys[] = {"local_steps", "consensus_lr", "compressor"};
std::size_t floats_for(std::size_t bytes) { return (bytes + sizeof(float) - 1) / sizeof(float); }

// The ranks of send_to that `to` takes and of recv_from that `from` takes, with each received
// one's index k into recv_from (its weight and public copy).
struct Edges {
  std::vector<int> to, from;
  std::vector<std::size_t> from_k;  // from[i] is m.recv_from[from_k[i]]
};
template <class To, class From>
Edges pick_edges(const topology::RankMixing& m, To to, From from) {
  Edges e;
  for (int r : m.send_to) {
    if (to(r)) e.to.push_back(r);
  }
  for (std::size_t k = 0; k < m.recv_from.size(); ++k) {
    if (from(k)) {
      e.from.push_back(m.recv_from[k]);
      e.from_k.push_back(k);
    }
  }
  return e;
}
}  // namespace

namespace {
// The compressed difference q to every out-neighbor each step, at the compressor's size.
CommPlan plan_choco(const PlanContext& c) {
  const auto compressor = make_compressor(c.config.algorithm.compressor);
  const double bytes = static_cast<double>(compressor->max_bytes(c.parameters));
  return {{neighbor_part("the compressed difference to each out-neighbor", c, bytes, 1)}, ""};
}
}  // namespace

const AlgorithmInfo kChoco{
    .name = "choco",
    .summary = "CHOCO-SGD (Koloskova et al. 2019): gossip of compressed differences with error "
               "compensation",
    .needs = GraphNeeds::kDoublyStochastic,
    .static_graph_only = true,
    .compresses = true,
    .rejoins = RejoinPolicy::kPerPair,
    .keys = kKeys,
    .make = [](const AveragingContext& c) -> std::unique_ptr<Averaging> {
      return std::make_unique<Choco>(c);
    },
    .plan = plan_choco};

ChocoBound choco_gamma_bound(double delta, const topology::MixingMatrix& w) {
  ChocoBound b;
  const auto lambda = topology::eigenvalues(w);
  b.spectral_gap = lambda.size() > 1 ? 1 - std::abs(lambda[1]) : 1;
  for (const auto& l : lambda) b.beta = std::max(b.beta, std::abs(1.0 - l));
  const double rho = b.spectral_gap, beta2 = b.beta * b.beta;
  b.gamma = rho * rho * delta /
            (16 * rho + rho * rho + 4 * beta2 + 2 * rho * beta2 - 8 * rho * delta);
  return b;
}

Choco::Choco(const AveragingContext& ctx)
    : hood_(ctx.hood),
      device_(ctx.device),
      params_(ctx.params),
      local_steps_(ctx.algorithm.local_steps),
      gamma_(static_cast<float>(ctx.algorithm.consensus_lr)),
      purpose_(ctx.purpose),
      layout_(ctx.hood.transport()),
      mixing_(topology::rank_mixing(ctx.topology, ctx.hood.transport().world_size(),
                                    ctx.hood.transport().rank(), ctx.seed, 0)),
      compressor_(make_compressor(ctx.algorithm.compressor)),
      contraction_(static_cast<float>(compressor_->contraction_scale(ctx.params.size()))),
      rng_(Rng(ctx.seed ^ 0xC0C0ull).fork(static_cast<std::uint64_t>(ctx.hood.transport().rank()))),
      xhat_(ctx.device.zeros(ctx.params.size())),
      s_(ctx.device.zeros(ctx.params.size())),
      diff_(ctx.device.zeros(ctx.params.size())),
      send_(compressor_->max_bytes(ctx.params.size())),
      slots_(ctx.hood.transport(), device::cpu(), floats_for(send_.size())) {
  send_region_ = hood_.transport().register_region(send_);
  slots_.reserve(std::max<std::size_t>(1, mixing_.recv_from.size()));
  for (std::size_t k = 0; k < mixing_.recv_from.size(); ++k) copies_.push_back(device_.zeros(params_.size()));
  in_s_.assign(mixing_.recv_from.size(), 1);
  const int n = hood_.transport().world_size();
  if (hood_.transport().rank() == 0 && n <= 1024) {  // an eigensolve of n x n: once, and small
    const double delta = compressor_->delta(params_.size());
    const ChocoBound b =
        choco_gamma_bound(delta, topology::mixing_at(ctx.topology, n, ctx.seed, 0));
    log().info("choco: consensus_lr {} against {:.3g}, the bound of Koloskova et al.'s Theorem 2 "
               "for {} (delta {:.3g} on {} floats) on this graph (spectral gap {:.3g}, "
               "||I - W|| {:.3g})", gamma_, b.gamma, compressor_->name(), delta, params_.size(),
               b.spectral_gap, b.beta);
  }
  if (!device_.host_memory()) {
    host_.assign(params_.size(), 0.0f);
    decoded_ = device_.zeros(params_.size());
  }
}

void Choco::add_decoded(std::span<float> target,
                        std::span<const std::pair<std::span<const std::byte>, float>> messages) {
  if (device_.host_memory()) {
    for (const auto& [message, scale] : messages) compressor_->decode_add(message, scale, target);
    return;
  }
  std::fill(host_.begin(), host_.end(), 0.0f);
  for (const auto& [message, scale] : messages) compressor_->decode_add(message, scale, host_);
  device_.upload(decoded_.span(), host_);
  device_.axpy(target, 1.0f, decoded_.span());
}

void Choco::after_step(std::int64_t step) {
  if (step % local_steps_ != 0) return;
  const std::int64_t round = step / local_steps_ - 1;
  Stopwatch watch;
  hand_over(step, step - local_steps_, round);
  // Who takes part this round: the live neighbors (an in-neighbor only once its term is in s).
  const Edges edges = pick_edges(
      mixing_, [&](int r) { return hood_.alive(r, step); },
      [&](std::size_t k) { return in_s_[k] && hood_.alive(mixing_.recv_from[k], step); });
  // Koloskova et al. 2019, Algorithm 2 (CHOCO-SGD), lines 4-9, after the local step (line 3):
  // q_i = Q(x_i - x^_i); send q_i, receive q_j; x^_j += q_j for j in N_i and i itself
  // (kept here as s_i = sum_j W_ij x^_j); x_i += gamma (s_i - x^_i).
  const std::span<float> diff = diff_.span();
  device_.add_scaled_diff(diff, 1.0f, params_, xhat_.span());  // diff is 0 on entry: x - x^
  std::span<const float> plain = diff;
  if (!device_.host_memory()) {
    device_.download(host_, diff);
    plain = host_;
  }
  const std::size_t bytes = compressor_->encode(plain, send_, rng_);
  device_.fill(diff, 0.0f);
  Stopwatch blocked;
  const auto got = exchange(hood_, layout_.make(purpose_, round), *send_region_, {0, bytes},
                            edges.to, slots_, edges.from, /*exact_size=*/false);
  stats_.wait_s += blocked.seconds();
  const std::span<const std::byte> own(send_.data(), bytes);
  const std::pair<std::span<const std::byte>, float> own_only[] = {{own, contraction_}};
  add_decoded(xhat_.span(), own_only);
  std::vector<std::pair<std::span<const std::byte>, float>> into_s;
  into_s.emplace_back(own, contraction_ * self_weight());
  std::vector<char> heard(mixing_.recv_from.size(), 0);
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] == kLost) continue;
    const std::size_t k = edges.from_k[i];
    heard[k] = 1;
    const std::span<const std::byte> message = std::as_bytes(slots_.slot(i)).first(got[i]);
    into_s.emplace_back(message, contraction_ * static_cast<float>(mixing_.recv_weights[k]));
    const std::pair<std::span<const std::byte>, float> one[] = {{message, contraction_}};
    add_decoded(copies_[k].span(), one);
  }
  add_decoded(s_.span(), into_s);
  // A neighbor that was out this round, or lost in it, sends no more: its term leaves s.
  for (std::size_t k = 0; k < in_s_.size(); ++k) {
    if (in_s_[k] && !heard[k]) leave(k);
  }
  device_.add_scaled_diff(params_, gamma_, s_.span(), xhat_.span());
  stats_.comm_s += watch.seconds();
}

void Choco::hand_over(std::int64_t step, std::int64_t before, std::int64_t round) {
  const bool all = std::exchange(resync_, false);
  auto joins = [&](int r) { return hood_.alive(r, step) && (all || !hood_.alive(r, before)); };
  const Edges edges =
      pick_edges(mixing_, joins, [&](std::size_t k) { return joins(mixing_.recv_from[k]); });
  if (edges.to.empty() && edges.from.empty()) return;
  const std::size_t n = params_.size();
  if (!xhat_region_) {
    xhat_region_ = register_array(hood_.transport(), device_, xhat_.span());
    join_slots_ = std::make_unique<RecvSlots>(hood_.transport(), device_, n);
  }
  const auto got = exchange(hood_, layout_.make(transport::purpose::kJoinState, round),
                            *xhat_region_, {0, n * sizeof(float)}, edges.to, *join_slots_,
                            edges.from);
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] == kLost) continue;  // lost again: the round finds it dead
    const std::size_t k = edges.from_k[i];
    const float w = static_cast<float>(mixing_.recv_weights[k]);
    const std::span<const float> theirs = join_slots_->slot(i);
    // s_i: W_ik (their x^ - the term it replaces), which is our copy of it or, while it was out,
    // our own x^ (its weight was ours).
    device_.add_scaled_diff(s_.span(), w, theirs, in_s_[k] ? copies_[k].span() : xhat_.span());
    in_s_[k] = 1;
    device_.copy(copies_[k].span(), theirs);
    if (!all) {
      log().info("rank {}: at step {}: public copies swapped with rank {}, back in the gossip",
                 hood_.transport().rank(), step, edges.from[i]);
    }
  }
}

float Choco::self_weight() const {
  double w = mixing_.self_weight;
  for (std::size_t k = 0; k < in_s_.size(); ++k) {
    if (!in_s_[k]) w += mixing_.recv_weights[k];
  }
  return static_cast<float>(w);
}

void Choco::leave(std::size_t k) {
  const float w = static_cast<float>(mixing_.recv_weights[k]);
  device_.add_scaled_diff(s_.span(), w, xhat_.span(), copies_[k].span());
  in_s_[k] = 0;
}

void Choco::rejoined() {
  device_.copy(xhat_.span(), params_);
  device_.copy(s_.span(), params_);
  for (auto& c : copies_) device_.copy(c.span(), params_);
  std::fill(in_s_.begin(), in_s_.end(), 0);
  resync_ = false;  // each neighbor comes back at its own join step
}

std::vector<std::pair<std::string, std::span<float>>> Choco::state() {
  std::vector<std::pair<std::string, std::span<float>>> out{{"choco.xhat", xhat_.span()},
                                                             {"choco.s", s_.span()}};
  for (std::size_t k = 0; k < copies_.size(); ++k) {
    out.emplace_back(fmt::format("choco.copy.{}", mixing_.recv_from[k]), copies_[k].span());
  }
  return out;
}

std::map<std::string, std::string> Choco::scalars() const {
  std::string out;
  for (std::size_t k = 0; k < in_s_.size(); ++k) {
    if (in_s_[k]) continue;
    if (!out.empty()) out += ',';
    out += std::to_string(mixing_.recv_from[k]);
  }
  return {{"choco.out", out}};
}

void Choco::restore_scalars(const std::map<std::string, std::string>& scalars) {
  std::fill(in_s_.begin(), in_s_.end(), 1);
  resync_ = true;
  auto it = scalars.find("choco.out");
  if (it == scalars.end() || it->second.empty()) return;
  std::stringstream list(it->second);
  std::string item;
  while (std::getline(list, item, ',')) {
    std::size_t k = 0;
    while (k < mixing_.recv_from.size() && std::to_string(mixing_.recv_from[k]) != item) ++k;
    if (k == mixing_.recv_from.size() || !in_s_[k]) {
      throw CheckpointError(fmt::format(
          "choco.out: '{}' is not a list of distinct in-neighbors of rank {}", it->second,
          hood_.transport().rank()));
    }
    in_s_[k] = 0;
  }
}

}  // namespace murmur::optimizers
