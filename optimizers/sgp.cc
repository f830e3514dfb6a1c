#include "optimizers/sgp.h"

#include <fmt/format.h>

#include "core/crc32c.h"
#include "core/error.h"
#include "core/stopwatch.h"
#include "optimizers/device_arrays.h"

namespace murmur::optimizers {

namespace {
constexpr std::string_view kKeys[] = {"local_steps", "overlap", "tau", "one_sided"};
}  // namespace

namespace {
// (x, w) pushed to every out-neighbor each step.
CommPlan plan_sgp(const PlanContext& c) {
  const double bytes = (static_cast<double>(c.parameters) + 1) * 4;
  return {{neighbor_part("(x, w) to each out-neighbor", c, bytes, 1)}, ""};
}
}  // namespace

const AlgorithmInfo kSgp{
    .name = "sgp",
    .summary = "Stochastic Gradient Push (Assran et al. 2019): push-sum on directed and "
               "time-varying graphs",
    .needs = GraphNeeds::kColumnStochastic,
    .overlaps = true,
    // One agreed join step, not one per pair: the graph is directed, so a pair that resumed
    // alone would move mass one way (2 -> 3 on the one-peer exponential graph of 4, which has
    // no 3 -> 2) until the others resume; the rejoined peer's weight halved every other round
    // and its model, stepped by lr / w, blew up within 60 rounds.
    .rejoins = RejoinPolicy::kAgreed,
    .keys = kKeys,
    .make = [](const AveragingContext& c) -> std::unique_ptr<Averaging> {
      return std::make_unique<Sgp>(c);
    },
    .plan = plan_sgp};

Sgp::Sgp(const AveragingContext& ctx)
    : hood_(ctx.hood),
      transport_(ctx.hood.transport()),
      device_(ctx.device),
      params_(ctx.params),
      local_steps_(ctx.algorithm.local_steps),
      tau_(ctx.algorithm.tau > 0 ? ctx.algorithm.tau : (ctx.algorithm.overlap ? 1 : 0)),
      purpose_(ctx.purpose),
      layout_(transport_),
      schedule_(ctx.topology, transport_.world_size(), transport_.rank(), ctx.seed),
      x_(ctx.device.zeros(ctx.params.size())),
      stride_((ctx.params.size() + 1 + 63) / 64 * 64),
      settle_(2 * std::chrono::milliseconds(ctx.transport_config.peer_timeout_ms)) {
  device_.copy(x_.span(), params_);
  send_ = device_.zeros(stride_ * (tau_ + 1));
  send_region_ = register_array(transport_, device_, send_.span());
  rounds_.resize(tau_ + 1);
  if (ctx.algorithm.one_sided) {
    std::vector<int> sources, targets;
    schedule_neighbors(ctx.topology, transport_.world_size(), transport_.rank(), ctx.seed, sources,
                       targets);
    windows_ = std::make_unique<PutWindows>(hood_, device_, params_.size() + 1, tau_ + 1,
                                            std::move(sources), std::move(targets), purpose_);
    return;
  }
  for (auto& r : rounds_) {
    r.slots = std::make_unique<RecvSlots>(transport_, device_, params_.size() + 1);
    r.slots->reserve(std::max<std::size_t>(1, schedule_.at(0).recv_from.size()));
  }
}

Sgp::~Sgp() {
  // Posted receives point into our slots: give them up before the memory goes.
  for (auto& r : rounds_) {
    for (auto* list : {&r.recvs, &r.sends}) {
      for (auto& q : *list) {
        if (q.valid() && !q.state()->done) transport_.cancel(q);
      }
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
  // optimizer moved z = x / w to params, so x gains exactly that move: x <- z + (1 - 1/w) x.
  device_.axpby(x_.span(), 1.0f, params_, 1.0f - static_cast<float>(1.0 / w_));
  std::vector<int> live = hood_.ranks(step);
  const auto now = std::chrono::steady_clock::now();
  if (!live_.empty() && live != live_) settle_until_ = now + settle_;
  if (now < settle_until_ && w_ != 1.0) {
    device_.scale(x_.span(), static_cast<float>(1.0 / w_));
    w_ = 1.0;
  }
  live_ = std::move(live);
  Round& r = rounds_[t % (tau_ + 1)];
  Stopwatch blocked;
  for (auto& q : r.sends) hood_.wait(q, "a push-sum send");
  double blocked_s = blocked.seconds();
  const topology::RankMixing m = renormalize(schedule_.at(t), hood_, step, Renormalize::kColumn);
  // Line 5-6: send (x, w) to the out-neighbors; each receiver scales by its column weight
  // W_ji = recv_weights on its side, so one buffer serves every out-neighbor.
  const std::size_t base = (t % (tau_ + 1)) * stride_;
  const std::span<float> out = send_.span().subspan(base, n + 1);
  if (windows_) windows_->wait_sent(t - tau_ - 1);  // the buffer's last round has landed
  device_.copy(out.first(n), x_.span());
  const float w = static_cast<float>(w_);
  device_.upload(out.subspan(n, 1), std::span<const float>(&w, 1));
  const transport::Tag tag = layout_.make(purpose_, t);
  r.round = t;
  r.recv_weights = m.recv_weights;
  r.recvs.clear();
  r.sends.clear();
  const transport::ByteRange range{base * sizeof(float), (n + 1) * sizeof(float)};
  if (windows_) {
    r.sources = m.recv_from;
    for (int peer : m.recv_from) windows_->expect(peer, t);
    const std::uint32_t crc = crc32c(std::as_bytes(std::span<const float>(out)));
    for (int peer : m.send_to) windows_->put(peer, t, *send_region_, range, crc);
  } else {
    r.slots->reserve(std::max<std::size_t>(1, m.recv_from.size()));
    for (std::size_t k = 0; k < m.recv_from.size(); ++k) {
      r.recvs.push_back(transport_.recv(m.recv_from[k], tag, r.slots->region(), r.slots->range(k)));
    }
    for (int peer : m.send_to) r.sends.push_back(transport_.send(peer, tag, *send_region_, range));
  }
  posted_ = t;
  // Line 7: keep the own share, x_i <- W_ii x_i, w_i <- W_ii w_i.
  device_.scale(x_.span(), static_cast<float>(m.self_weight));
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
      if (!req.state()->done) hood_.poll(req);
    }
  }
  if (windows_) windows_->progress();
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
  if (windows_) {
    for (std::size_t k = 0; k < r.sources.size(); ++k) {
      const std::span<const float> in = windows_->landed(r.sources[k], r.round);
      if (in.empty()) continue;  // lost, as below
      device_.axpy(x_.span(), static_cast<float>(r.recv_weights[k]), in.first(n));
      w_ += r.recv_weights[k] * in[n];
      windows_->release(r.sources[k], r.round);
    }
    r.sources.clear();
    consumed_ = r.round;
    return;
  }
  for (std::size_t k = 0; k < r.recvs.size(); ++k) {
    // A lost in-neighbor's share is lost with it (its mass died with it).
    if (!hood_.wait(r.recvs[k], "a push-sum receive")) continue;
    if (r.recvs[k].state()->bytes != (n + 1) * sizeof(float)) {
      throw ProtocolError(fmt::format("sgp: rank {}: rank {} sent a push-sum message of {} bytes, "
                                      "expected {}", transport_.rank(), r.recvs[k].state()->peer,
                                      r.recvs[k].state()->bytes, (n + 1) * sizeof(float)));
    }
    const std::span<float> in = r.slots->slot(k);
    device_.axpy(x_.span(), static_cast<float>(r.recv_weights[k]), in.first(n));
    float their_w = 0;
    device_.download(std::span<float>(&their_w, 1), in.subspan(n, 1));
    w_ += r.recv_weights[k] * their_w;
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
    for (auto& q : r.sends) hood_.wait(q, "a push-sum send");
    r.sends.clear();
  }
  if (windows_) windows_->finish();
  publish();
  const double s = watch.seconds();
  stats_.comm_s += s;
  stats_.wait_s += s;
}

void Sgp::publish() { debiased(params_); }

bool Sgp::debiased(std::span<float> out) {
  device_.copy(out, x_.span());
  device_.scale(out, static_cast<float>(1.0 / w_));
  return true;
}

void Sgp::rejoined() {
  device_.copy(x_.span(), params_);
  w_ = 1.0;
}

std::vector<std::pair<std::string, std::span<float>>> Sgp::state() {
  return {{"sgp.x", x_.span()}};
}

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
