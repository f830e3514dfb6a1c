#include "optimizers/sgp.h"

#include <fmt/format.h>

#include "core/error.h"
#include "optimizers/mixing_ops.h"

namespace murmur::optimizers {

Sgp::Sgp(const AveragingContext& ctx)
    : transport_(ctx.transport),
      params_(ctx.params),
      local_steps_(ctx.algorithm.local_steps),
      tau_(ctx.algorithm.tau > 0 ? ctx.algorithm.tau : (ctx.algorithm.overlap ? 1 : 0)),
      options_(collective_options(ctx.transport_config)),
      live_(ctx.live),
      schedule_(ctx.topology, ctx.transport.world_size(), ctx.transport.rank(), ctx.seed),
      x_(ctx.params.begin(), ctx.params.end()),
      stride_((ctx.params.size() + 1 + 63) / 64 * 64) {
  send_.assign(stride_ * (tau_ + 1), 0.0f);
  send_region_ = transport_.register_region(std::as_writable_bytes(std::span(send_)));
  rounds_.resize(tau_ + 1);
  for (auto& r : rounds_) {
    r.slots = std::make_unique<RecvSlots>(transport_, params_.size() + 1);
    r.slots->reserve(std::max<std::size_t>(1, schedule_.at(0).recv_from.size()));
  }
}

Sgp::~Sgp() {
  // Posted receives point into our slots: give them up before the memory goes.
  for (auto& r : rounds_) {
    for (auto& q : r.recvs) {
      if (q.valid() && !q.state()->done) transport_.cancel(q);
    }
    for (auto& q : r.sends) {
      if (q.valid() && !q.state()->done) transport_.cancel(q);
    }
  }
}

void Sgp::after_step(std::int64_t step) {
  if (step % local_steps_ != 0) return;
  const std::int64_t t = step / local_steps_ - 1;
  Stopwatch watch;
  const std::size_t n = params_.size();
  if (posted_ < 0) consumed_ = posted_ = t - 1;  // the first round, or the first after a resume
  // Assran et al. 2019, Algorithm 1, line 4: x_i^(k+1/2) = x_i^(k) - lr grad F(z_i^(k)). The
  // optimizer moved z = x / w to params, so x gains exactly that move: x += params - x / w.
  {
    const float inv = static_cast<float>(1.0 / w_);
    float* __restrict x = x_.data();
    const float* __restrict z = params_.data();
    for (std::size_t i = 0; i < n; ++i) x[i] += z[i] - x[i] * inv;
  }
  Round& r = rounds_[t % (tau_ + 1)];
  Stopwatch blocked;
  for (auto& q : r.sends) wait(q, "a push-sum send");
  double blocked_s = blocked.seconds();
  const topology::RankMixing m =
      live_ ? renormalize(schedule_.at(t), *live_, step, Renormalize::kColumn) : schedule_.at(t);
  // Line 5-6: send (x, w) to the out-neighbors; each receiver scales by its column weight
  // W_ji = recv_weights on its side, so one buffer serves every out-neighbor.
  const std::size_t base = (t % (tau_ + 1)) * stride_;
  std::copy(x_.begin(), x_.end(), send_.begin() + base);
  send_[base + n] = static_cast<float>(w_);
  const transport::Tag tag = p2p_tag(Purpose::kPushSum, t);
  r.round = t;
  r.recv_weights = m.recv_weights;
  r.slots->reserve(std::max<std::size_t>(1, m.recv_from.size()));
  r.recvs.clear();
  r.sends.clear();
  for (std::size_t k = 0; k < m.recv_from.size(); ++k) {
    r.recvs.push_back(transport_.recv(m.recv_from[k], tag, r.slots->region(), r.slots->range(k)));
  }
  const transport::ByteRange out{base * sizeof(float), (n + 1) * sizeof(float)};
  for (int peer : m.send_to) r.sends.push_back(transport_.send(peer, tag, *send_region_, out));
  posted_ = t;
  // Line 7: keep the own share, x_i <- W_ii x_i, w_i <- W_ii w_i.
  scale(x_, static_cast<float>(m.self_weight));
  w_ *= m.self_weight;
  // Line 8: add what arrived. Overlap SGP consumes round t - tau now (bounded delay tau);
  // meanwhile drive progress on the younger rounds so their messages keep moving.
  while (consumed_ < t - tau_) {
    Round& old = rounds_[(consumed_ + 1) % (tau_ + 1)];
    Stopwatch b;
    consume(old);
    blocked_s += b.seconds();
  }
  for (auto& q : rounds_) {
    for (auto& req : q.recvs) {
      if (req.state()->done) continue;
      try {
        transport_.test(req);
      } catch (const PeerLost&) {
        if (!live_) throw;  // with a LiveSet, consume() finds the failure and marks the peer
      }
    }
  }
  publish();
  stats_.wait_s += blocked_s;
  stats_.comm_s += watch.seconds();
}

void Sgp::consume(Round& r) {
  const std::size_t n = params_.size();
  if (r.round != consumed_ + 1) {  // nothing was posted for this round (before a resume)
    ++consumed_;
    return;
  }
  for (std::size_t k = 0; k < r.recvs.size(); ++k) {
    // A lost in-neighbor's share is lost with it (its mass died with it).
    if (!wait(r.recvs[k], "a push-sum receive")) continue;
    if (r.recvs[k].state()->bytes != (n + 1) * sizeof(float)) {
      throw ProtocolError(fmt::format("sgp: rank {}: a push-sum message of {} bytes, expected {}",
                                      transport_.rank(), r.recvs[k].state()->bytes,
                                      (n + 1) * sizeof(float)));
    }
    std::span<float> in = r.slots->slot(k);
    const float a = static_cast<float>(r.recv_weights[k]);
    axpy(x_, a, in.first(n));
    w_ += r.recv_weights[k] * in[n];
  }
  r.recvs.clear();
  consumed_ = r.round;
}

void Sgp::flush() {
  Stopwatch watch;
  while (consumed_ < posted_) consume(rounds_[(consumed_ + 1) % (tau_ + 1)]);
  // Our last messages must have left before the caller may exit or checkpoint: a receiver
  // still owes them to its sum.
  for (auto& r : rounds_) {
    for (auto& q : r.sends) wait(q, "a push-sum send");
    r.sends.clear();
  }
  publish();
  const double s = watch.seconds();
  stats_.comm_s += s;
  stats_.wait_s += s;
}

bool Sgp::wait(transport::Request& q, const char* what) {
  if (live_) return q.state()->done && !q.state()->error ? true : wait_live(transport_, q, *live_, what);
  transport::wait_or_lost(transport_, q, options_.timeout, what);
  return true;
}

void Sgp::publish() {
  const float inv = static_cast<float>(1.0 / w_);
  float* __restrict z = params_.data();
  const float* __restrict x = x_.data();
  for (std::size_t i = 0, n = params_.size(); i < n; ++i) z[i] = x[i] * inv;
}

bool Sgp::debiased(std::span<float> out) const {
  const double inv = 1.0 / w_;
  for (std::size_t i = 0; i < out.size() && i < x_.size(); ++i) {
    out[i] = static_cast<float>(x_[i] * inv);
  }
  return true;
}

std::vector<std::pair<std::string, std::span<float>>> Sgp::state() { return {{"sgp.x", x_}}; }

std::map<std::string, std::string> Sgp::scalars() const {
  return {{"sgp.w", fmt::format("{:.17g}", w_)}};
}

void Sgp::restore_scalars(const std::map<std::string, std::string>& scalars) {
  auto it = scalars.find("sgp.w");
  if (it == scalars.end()) return;
  try {
    w_ = std::stod(it->second);
  } catch (const std::exception&) {
    throw CheckpointError(fmt::format("sgp.w: '{}' is not a number", it->second));
  }
  consumed_ = posted_ = -1;
}

}  // namespace murmur::optimizers
