#include "optimizers/live_set.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "core/logging.h"
#include "optimizers/comm_thread.h"

namespace murmur::optimizers {

LiveSet::LiveSet(int world_size, int rank, std::chrono::milliseconds peer_timeout,
                 std::chrono::milliseconds message_timeout)
    : rank_(rank),
      peer_timeout_(peer_timeout),
      message_timeout_(std::max(peer_timeout, message_timeout)),
      alive_from_(world_size, kAlways) {}

bool LiveSet::alive(int r, std::int64_t step) const {
  if (r == rank_) return true;
  std::lock_guard lock(mu_);
  return step >= alive_from_.at(r);
}

bool LiveSet::dead(int r) const {
  std::lock_guard lock(mu_);
  return alive_from_.at(r) == kDead;
}

void LiveSet::mark_dead(int r, std::string_view why) {
  if (r == rank_ || r < 0 || r >= world_size()) return;
  {
    std::lock_guard lock(mu_);
    if (alive_from_[r] == kDead) return;
    alive_from_[r] = kDead;
    ++version_;
  }
  log().warn("rank {}: lost rank {} ({}); dropping it from the mixing weights and going on "
             "(run.on_peer_failure: continue)", rank_, r, why);
  if (on_dead_) on_dead_(r);
}

void LiveSet::revive(int r, std::int64_t from_step) {
  if (r == rank_) return;
  {
    std::lock_guard lock(mu_);
    alive_from_.at(r) = from_step;
    ++version_;
  }
  log().info("rank {}: rank {} rejoins from step {}", rank_, r, from_step);
}

std::vector<int> LiveSet::live_ranks(std::int64_t step) const {
  std::vector<int> out;
  std::lock_guard lock(mu_);
  for (int r = 0; r < static_cast<int>(alive_from_.size()); ++r) {
    if (r == rank_ || step >= alive_from_[r]) out.push_back(r);
  }
  return out;
}

std::vector<int> LiveSet::dead_ranks() const {
  std::vector<int> out;
  std::lock_guard lock(mu_);
  for (int r = 0; r < static_cast<int>(alive_from_.size()); ++r) {
    if (alive_from_[r] == kDead) out.push_back(r);
  }
  return out;
}

std::uint64_t LiveSet::version() const {
  std::lock_guard lock(mu_);
  return version_;
}

std::uint64_t LiveSet::agreements() const {
  std::lock_guard lock(mu_);
  return agreements_;
}

void LiveSet::adopt_agreements(std::uint64_t count) {
  std::lock_guard lock(mu_);
  agreements_ = std::max(agreements_, count);
}

std::uint64_t LiveSet::next_agreement() {
  std::lock_guard lock(mu_);
  return agreements_++;
}

topology::RankMixing renormalize(const topology::RankMixing& m, const LiveSet& live,
                                 std::int64_t step, Renormalize how) {
  topology::RankMixing out;
  out.self_weight = m.self_weight;
  for (std::size_t k = 0; k < m.recv_from.size(); ++k) {
    if (live.alive(m.recv_from[k], step)) {
      out.recv_from.push_back(m.recv_from[k]);
      out.recv_weights.push_back(m.recv_weights[k]);
    } else if (how == Renormalize::kRow) {
      out.self_weight += m.recv_weights[k];  // the row keeps summing to 1
    }
  }
  for (std::size_t k = 0; k < m.send_to.size(); ++k) {
    const double w = k < m.send_weights.size() ? m.send_weights[k] : 0.0;
    if (live.alive(m.send_to[k], step)) {
      out.send_to.push_back(m.send_to[k]);
      if (k < m.send_weights.size()) out.send_weights.push_back(w);
    } else if (how == Renormalize::kColumn) {
      out.self_weight += w;  // the column keeps summing to 1: no mass is pushed into the void
    }
  }
  return out;
}

bool wait_live(transport::Transport& transport, transport::Request& request, LiveSet& live,
               const char* what) {
  const int peer = request.state()->peer;
  transport::WaitEnd end{};
  try {
    end = transport::wait_heard(transport, request, live.peer_timeout(), live.message_timeout());
    if (end == transport::WaitEnd::kDone) return true;
  } catch (const PeerLost& e) {
    live.mark_dead(peer, e.what());
    return false;
  }
  transport.cancel(request);  // the buffer may be reused once we return
  live.mark_dead(peer, end == transport::WaitEnd::kSilent
                           ? fmt::format("{}: the rank sent nothing for transport.peer_timeout_ms "
                                         "= {}", what, live.peer_timeout().count())
                           : fmt::format("{}: heard, but the message did not come within "
                                         "transport.recv_timeout_ms = {}", what,
                                         live.message_timeout().count()));
  return false;
}

std::vector<bool> exchange_live(transport::Transport& transport, transport::Tag tag,
                                const transport::Region& from, transport::ByteRange out,
                                std::span<const int> send_to, RecvSlots& slots,
                                std::span<const int> recv_from, LiveSet& live) {
  slots.reserve(std::max<std::size_t>(1, recv_from.size()));
  std::vector<transport::Request> recvs, sends;
  transport::CancelOnUnwind guard(transport);
  guard.watch(recvs);
  guard.watch(sends);
  for (std::size_t k = 0; k < recv_from.size(); ++k) {
    recvs.push_back(transport.recv(recv_from[k], tag, slots.region(), slots.range(k)));
  }
  for (int peer : send_to) sends.push_back(transport.send(peer, tag, from, out));
  std::vector<bool> got(recv_from.size(), false);
  for (std::size_t k = 0; k < recvs.size(); ++k) {
    if (!wait_live(transport, recvs[k], live, "a neighbor exchange receive")) continue;
    const std::size_t bytes = recvs[k].state()->bytes;
    if (bytes != slots.range(k).size) {
      throw ProtocolError(fmt::format(
          "{}: rank {}: rank {} sent {} bytes under tag {:#x}, expected {} (are the models the "
          "same size?)", transport.name(), transport.rank(), recv_from[k], bytes, tag,
          slots.range(k).size));
    }
    got[k] = true;
  }
  for (auto& s : sends) wait_live(transport, s, live, "a neighbor exchange send");
  return got;
}

}  // namespace murmur::optimizers
