#include "optimizers/dpsgd.h"

#include "optimizers/mixing_ops.h"

namespace murmur::optimizers {

Dpsgd::Dpsgd(const AveragingContext& ctx)
    : transport_(ctx.transport),
      params_region_(ctx.params_region),
      params_(ctx.params),
      local_steps_(ctx.algorithm.local_steps),
      overlap_(ctx.algorithm.overlap),
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

void Dpsgd::after_step(std::int64_t step) {
  if (step % local_steps_ != 0) return;
  const std::int64_t round = step / local_steps_ - 1;
  Stopwatch watch;
  const transport::ByteRange all{0, params_.size_bytes()};
  if (!overlap_) {
    const topology::RankMixing& m = schedule_.at(round);
    Stopwatch blocked;
    exchange_into_slots(transport_, p2p_tag(Purpose::kGossip, round), params_region_, all,
                        m.send_to, slots_, m.recv_from, options_);
    stats_.wait_s += blocked.seconds();
    // Lian et al. 2017, Algorithm 1, line 6: x_i <- sum_j W_ij x_j (the gradient step was
    // already taken by the local optimizer on x_i, the order their eq. (3) allows).
    inputs_.clear();
    weights_.clear();
    for (std::size_t k = 0; k < m.recv_from.size(); ++k) {
      inputs_.push_back(slots_.slot(k).data());
      weights_.push_back(static_cast<float>(m.recv_weights[k]));
    }
    mix(params_, static_cast<float>(m.self_weight), inputs_, weights_);
  } else {
    apply_pending();
    copy(snapshot_, params_);
    inflight_ = schedule_.at(round);
    pending_ = true;
    const transport::Tag tag = p2p_tag(Purpose::kGossip, round);
    comm_->start([this, tag, all] {
      exchange_into_slots(transport_, tag, *snapshot_region_, all, inflight_.send_to, slots_,
                          inflight_.recv_from, options_);
    });
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
