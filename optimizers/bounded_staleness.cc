#include "optimizers/bounded_staleness.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "core/logging.h"
#include "core/stopwatch.h"
#include "optimizers/device_arrays.h"
#include "transport/collectives.h"

namespace murmur::optimizers {

BoundedStaleness::BoundedStaleness(const AveragingContext& ctx)
    : hood_(ctx.hood),
      device_(ctx.device),
      params_(ctx.params),
      local_steps_(ctx.algorithm.local_steps),
      s_(ctx.algorithm.max_staleness),
      purpose_(ctx.purpose),
      layout_(ctx.hood.transport()),
      mixing_(topology::rank_mixing(ctx.topology, ctx.hood.transport().world_size(),
                                    ctx.hood.transport().rank(), ctx.seed, 0)),
      ring_(2 * static_cast<std::int64_t>(s_) + 1),
      send_ring_(2 * static_cast<std::int64_t>(s_) + 2),
      slots_(ctx.hood.transport(), ctx.device, ctx.params.size()),
      snapshots_(ctx.hood.transport(), ctx.device, ctx.params.size()) {
  if (s_ < 1 || s_ > kMaxStaleness) {
    throw ConfigError(fmt::format("algorithm.max_staleness: {} (bounded staleness takes 1 to {})",
                                  s_, kMaxStaleness));
  }
  for (std::size_t k = 0; k < mixing_.recv_from.size(); ++k) {
    Neighbor& n = in_.emplace_back();
    n.rank = mixing_.recv_from[k];
    n.weight = mixing_.recv_weights[k];
    n.recvs.resize(static_cast<std::size_t>(ring_));
    n.posted.assign(static_cast<std::size_t>(ring_), -1);
  }
  out_ = mixing_.send_to;
  out_dropped_.assign(out_.size(), false);
  slots_.reserve(std::max<std::size_t>(1, in_.size() * static_cast<std::size_t>(ring_)));
  snapshots_.reserve(static_cast<std::size_t>(send_ring_));
  sends_.resize(static_cast<std::size_t>(send_ring_));
  notices_ = device_.zeros(1 + out_.size());
  notices_region_ = register_array(ctx.hood.transport(), device_, notices_.span());
  report_.initiator = true;  // every use of a neighbor's model is this peer's alone
  report_.staleness.assign(kStalenessBuckets, 0);
}

BoundedStaleness::~BoundedStaleness() {
  // Withdraw whatever is still posted (an exception ended the run, or finish() never ran), so
  // that no transport writes into or reads from the slots after they are freed.
  transport::Transport& t = hood_.transport();
  for (Neighbor& n : in_) {
    for (std::size_t i = 0; i < n.recvs.size(); ++i) {
      if (n.posted[i] >= 0) transport::cancel_quietly(t, n.recvs[i]);
    }
  }
  for (auto& ring : sends_) {
    for (auto& s : ring) transport::cancel_quietly(t, s);
  }
}

std::size_t BoundedStaleness::ring_index(std::int64_t round) const {
  return static_cast<std::size_t>(round % ring_);
}

std::size_t BoundedStaleness::slot_of(std::size_t k, std::int64_t round) const {
  return k * static_cast<std::size_t>(ring_) + ring_index(round);
}

void BoundedStaleness::after_step(std::int64_t step) {
  if (step % local_steps_ != 0) return;
  const std::int64_t t = step / local_steps_ - 1;
  Stopwatch watch;
  if (last_round_ < 0) posted_through_ = t - 1;  // the first round of this run (or of a resume)
  last_round_ = t;
  send(t, step);
  // Wait only for a neighbor more than s rounds behind: its round t - s is the oldest usable.
  for (std::size_t k = 0; k < in_.size(); ++k) {
    if (in_[k].dropped) continue;
    if (!hood_.alive(in_[k].rank, step)) {
      drop(k, step);
      continue;
    }
    drain(k);
    if (in_[k].freshest >= t - s_) continue;
    Stopwatch blocked;
    const bool landed = await(k, t - s_);
    stats_.wait_s += blocked.seconds();
    if (!landed) {
      drop(k, step);
      continue;
    }
    drain(k);  // fresher rounds may have landed meanwhile
  }
  // x_i <- W_ii x_i + sum_j W_ij x_j^(r_j). A neighbor dropped, or not heard from yet in the
  // first s rounds (all peers start from the same model), gives its weight to x_i.
  inputs_.clear();
  weights_.clear();
  double self = mixing_.self_weight;
  for (std::size_t k = 0; k < in_.size(); ++k) {
    const Neighbor& n = in_[k];
    if (n.dropped || n.freshest < 0) {
      self += n.weight;
      continue;
    }
    inputs_.push_back(slots_.slot(slot_of(k, n.freshest)).data());
    weights_.push_back(static_cast<float>(n.weight));
    const std::int64_t age = std::max<std::int64_t>(0, t - n.freshest) * local_steps_;
    ++report_.exchanges;
    ++report_.staleness[std::min<std::size_t>(static_cast<std::size_t>(age), kStalenessBuckets - 1)];
  }
  device_.mix(params_, static_cast<float>(self), inputs_, weights_);
  post_through(t + s_);
  stats_.comm_s += watch.seconds();
}

void BoundedStaleness::send(std::int64_t round, std::int64_t step) {
  transport::Transport& t = hood_.transport();
  const std::size_t snap = static_cast<std::size_t>(round % send_ring_);
  // The snapshot's last sends (round - (2s + 2)) have landed by now but for a neighbor that
  // has not polled since; waiting for them is what lets the snapshot be written again.
  for (std::size_t o = 0; o < sends_[snap].size(); ++o) {
    if (!sends_[snap][o].valid()) continue;
    Stopwatch blocked;
    if (!hood_.wait(sends_[snap][o], "a bounded-staleness send")) out_dropped_[o] = true;
    stats_.wait_s += blocked.seconds();
  }
  sends_[snap].assign(out_.size(), transport::Request{});
  device_.copy(snapshots_.slot(snap), params_);
  const transport::Tag tag = layout_.make(purpose_, round);
  for (std::size_t o = 0; o < out_.size(); ++o) {
    if (out_dropped_[o] || !hood_.alive(out_[o], step)) {
      out_dropped_[o] = true;
      continue;
    }
    sends_[snap][o] = t.send(out_[o], tag, snapshots_.region(), snapshots_.range(snap));
  }
}

void BoundedStaleness::post_through(std::int64_t round) {
  transport::Transport& t = hood_.transport();
  for (std::int64_t r = posted_through_ + 1; r <= round; ++r) {
    const transport::Tag tag = layout_.make(purpose_, r);
    for (std::size_t k = 0; k < in_.size(); ++k) {
      Neighbor& n = in_[k];
      if (n.dropped) continue;
      const std::size_t i = ring_index(r);
      // The slot's previous round (r - 2s - 1) was sent before the round >= t - s that this
      // peer has from the neighbor: it lands, unless the neighbor is lost meanwhile.
      if (n.posted[i] >= 0 && !await(k, n.posted[i])) {
        drop(k, -1);
        continue;
      }
      n.recvs[i] = t.recv(n.rank, tag, slots_.region(), slots_.range(slot_of(k, r)));
      n.posted[i] = r;
    }
  }
  posted_through_ = std::max(posted_through_, round);
}

void BoundedStaleness::drain(std::size_t k) {
  Neighbor& n = in_[k];
  for (std::size_t i = 0; i < n.recvs.size(); ++i) {
    if (n.posted[i] < 0 || !hood_.poll(n.recvs[i])) continue;
    if (!await(k, n.posted[i])) {  // done: returns at once, with a failure's verdict
      drop(k, -1);
      return;
    }
  }
}

bool BoundedStaleness::await(std::size_t k, std::int64_t round) {
  Neighbor& n = in_[k];
  const std::size_t i = ring_index(round);
  if (n.posted[i] != round) return true;  // landed earlier
  if (!hood_.wait(n.recvs[i], "a bounded-staleness receive")) {
    n.posted[i] = -1;  // cancelled by the wait
    return false;
  }
  n.posted[i] = -1;
  const std::size_t bytes = n.recvs[i].state()->bytes;
  if (bytes != slots_.range(0).size) {
    transport::Transport& t = hood_.transport();
    throw ProtocolError(fmt::format(
        "{}: rank {}: rank {} sent {} bytes for round {}, expected {} (are the models the same "
        "size?)", t.name(), t.rank(), n.rank, bytes, round, slots_.range(0).size));
  }
  n.freshest = std::max(n.freshest, round);
  return true;
}

void BoundedStaleness::drop(std::size_t k, std::int64_t step) {
  Neighbor& n = in_[k];
  if (n.dropped) return;
  n.dropped = true;
  for (std::size_t i = 0; i < n.recvs.size(); ++i) {
    if (n.posted[i] >= 0) hood_.transport().cancel(n.recvs[i]);
    n.posted[i] = -1;
  }
  ++report_.lost;
  log().warn("rank {}: dpsgd (max_staleness {}): neighbor {} lost{}; its weight stays here for "
             "the rest of the run", hood_.transport().rank(), s_, n.rank,
             step >= 0 ? fmt::format(" at step {}", step) : std::string());
}

void BoundedStaleness::finish() {
  if (last_round_ < 0) return;
  Stopwatch watch;
  transport::Transport& t = hood_.transport();
  const std::int64_t end = last_round_;
  // The end handshake: a peer goes (and its transport with it) only once every out-neighbor has
  // said it holds no receive for it any more; until then a receive posted for a round beyond
  // the end would fail as the connection closed, like a lost peer's.
  // The notice is a tag (the round is in it, so the peers must end at the same one) with one
  // float, on the device like every buffer this transport is handed.
  const transport::Tag end_tag = layout_.make(purpose_, end, /*step=*/1);
  const auto notice = [](std::size_t i) {
    return transport::ByteRange{i * sizeof(float), sizeof(float)};
  };
  std::vector<transport::Request> told, heard(out_.size());
  for (std::size_t o = 0; o < out_.size(); ++o) {
    if (!out_dropped_[o]) {
      heard[o] = t.recv(out_[o], end_tag, *notices_region_, notice(1 + o));
    }
  }
  // Every round a neighbor sent up to our last one is received, so that its send lands (over ucx
  // and ofi a large message moves only once it is matched); the rounds after were never sent.
  for (std::size_t k = 0; k < in_.size(); ++k) {
    Neighbor& n = in_[k];
    for (std::size_t i = 0; i < n.recvs.size() && !n.dropped; ++i) {
      if (n.posted[i] < 0) continue;
      if (n.posted[i] > end) {
        t.cancel(n.recvs[i]);
        n.posted[i] = -1;
      } else if (!await(k, n.posted[i])) {
        drop(k, -1);
      }
    }
    if (!n.dropped) told.push_back(t.send(n.rank, end_tag, *notices_region_, notice(0)));
  }
  for (std::size_t o = 0; o < out_.size(); ++o) {
    if (heard[o].valid()) hood_.wait(heard[o], "a bounded-staleness end notice");
  }
  for (auto& r : told) hood_.wait(r, "a bounded-staleness end notice");
  for (auto& ring : sends_) {
    for (auto& r : ring) {
      if (r.valid()) hood_.wait(r, "a bounded-staleness send");
    }
    ring.clear();
  }
  last_round_ = -1;
  stats_.wait_s += watch.seconds();
  stats_.comm_s += watch.seconds();
}

}  // namespace murmur::optimizers
