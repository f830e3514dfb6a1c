#include "optimizers/dpsgd.h"

#include "optimizers/mixing_ops.h"

namespace murmur::optimizers {

Dpsgd::Dpsgd(const AveragingContext& ctx)
    : transport_(ctx.transport),
      params_region_(ctx.params_region),
      params_(ctx.params),
      local_steps_(ctx.algorithm.local_steps),
      overlap_(ctx.algorithm.overlap),
      live_(ctx.live),
      options_(collective_options(ctx.transport_config)),
      schedule_(ctx.topology, ctx.transport.world_size(), ctx.transport.rank(), ctx.seed),
      slots_(ctx.transport, ctx.params.size()) {
  slots_.reserve(std::max<std::size_t>(1, schedule_.at(0).recv_from.size()));
  if (overlap_) {
    snapshot_.assign(params_.size(), 0.0f);
    snapshot_region_ = transport_.register_region(std::as_writable_bytes(std::span(snapshot_)));
    comm_ = std::make_unique<CommThread>();
  }
}

Dpsgd::~Dpsgd() = default;

topology::RankMixing Dpsgd::mixing(std::int64_t round, std::int64_t step) {
  const topology::RankMixing& m = schedule_.at(round);
  return live_ ? renormalize(m, *live_, step, Renormalize::kRow) : m;
}

std::vector<bool> Dpsgd::exchange(transport::Tag tag, const transport::Region& from,
                                  const topology::RankMixing& m) {
  const transport::ByteRange all{0, params_.size_bytes()};
  if (live_) return exchange_live(transport_, tag, from, all, m.send_to, slots_, m.recv_from, *live_);
  exchange_into_slots(transport_, tag, from, all, m.send_to, slots_, m.recv_from, options_);
  return std::vector<bool>(m.recv_from.size(), true);
}

void Dpsgd::after_step(std::int64_t step) {
  if (step % local_steps_ != 0) return;
  const std::int64_t round = step / local_steps_ - 1;
  Stopwatch watch;
  if (!overlap_) {
    const topology::RankMixing m = mixing(round, step);
    Stopwatch blocked;
    const std::vector<bool> got = exchange(p2p_tag(Purpose::kGossip, round), params_region_, m);
    stats_.wait_s += blocked.seconds();
    // Lian et al. 2017, Algorithm 1, line 6: x_i <- sum_j W_ij x_j (the gradient step was
    // already taken by the local optimizer on x_i, the order their eq. (3) allows). A neighbor
    // lost during this very exchange gives its weight back to x_i, as renormalize() does.
    inputs_.clear();
    weights_.clear();
    float self = static_cast<float>(m.self_weight);
    for (std::size_t k = 0; k < m.recv_from.size(); ++k) {
      if (!got[k]) {
        self += static_cast<float>(m.recv_weights[k]);
        continue;
      }
      inputs_.push_back(slots_.slot(k).data());
      weights_.push_back(static_cast<float>(m.recv_weights[k]));
    }
    mix(params_, self, inputs_, weights_);
  } else {
    apply_pending();
    copy(snapshot_, params_);
    inflight_ = mixing(round, step);
    pending_ = true;
    const transport::Tag tag = p2p_tag(Purpose::kGossip, round);
    comm_->start([this, tag] { inflight_got_ = exchange(tag, *snapshot_region_, inflight_); });
  }
  stats_.comm_s += watch.seconds();
}

void Dpsgd::apply_pending() {
  if (!pending_) return;
  stats_.wait_s += comm_->wait();
  pending_ = false;
  // The overlapped D-PSGD update: the round's mixing computed on the snapshot x' and added as
  // a difference, x_i += sum_{j != i} W_ij (x_j' - x_i'), so the local step taken meanwhile is
  // kept. For doubly stochastic W the differences cancel over peers: the mean is exact.
  for (std::size_t k = 0; k < inflight_.recv_from.size(); ++k) {
    if (!inflight_got_[k]) continue;  // lost: its weight stays with x_i (a zero difference)
    add_scaled_diff(params_, static_cast<float>(inflight_.recv_weights[k]), slots_.slot(k),
                    snapshot_);
  }
}

void Dpsgd::flush() {
  Stopwatch watch;
  if (overlap_) apply_pending();
  stats_.comm_s += watch.seconds();
}

}  // namespace murmur::optimizers
