#include "optimizers/live_allreduce.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "core/logging.h"
#include "optimizers/comm_thread.h"
#include "transport/frame.h"

namespace murmur::optimizers {

namespace {

// A ring waits on each member for the peer timeout, heard or not (unlike the gossip algorithms'
// wait_live): a member that has left a broken ring for the agreement is alive and sends
// heartbeats, but will never send its part. Waiting for it longer kept the others out of the
// agreement until it had given up on them (seen in tests). A slow member that misses the peer
// timeout is not lost either: it answers the agreement, and the ring is tried again.
transport::CollectiveOptions with_timeout(transport::CollectiveOptions o, const LiveSet& live) {
  o.timeout = live.peer_timeout();
  return o;
}

}  // namespace

LiveAllreduce::LiveAllreduce(transport::Transport& transport, LiveSet& live,
                             transport::CollectiveOptions options)
    : transport_(transport), live_(live), ring_(transport, with_timeout(options, live)) {}

bool LiveAllreduce::average(transport::Region& region, std::span<float> data, transport::Tag tag,
                            std::int64_t round) {
  backup_.assign(data.begin(), data.end());
  for (int attempt = 0; attempt <= live_.world_size(); ++attempt) {
    const std::vector<int> ranks = live_.live_ranks(round);
    if (ranks.size() == 1) return true;  // alone: the mean is our own model
    ring_.set_ranks(ranks);
    // Rings of different agreements never exchange a message (stale ones stay unmatched).
    const transport::Tag t = tag ^ ((live_.agreements() & 0xF) << 20);
    try {
      ring_.run(region, data, transport::ReduceOp::kAverage, t);
      return true;
    } catch (const TransportError& e) {
      // PeerLost or a timeout, or a ring of another shape (a ProtocolError on sizes): the ring
      // is broken somewhere; which rank is at fault is for the agreement to find out.
      log().warn("rank {}: allreduce of round {} over {} ranks failed ({}); agreeing with the "
                 "survivors on a new ring", transport_.rank(), round, ranks.size(), e.what());
    }
    std::copy(backup_.begin(), backup_.end(), data.begin());
    const std::int64_t highest = agree(round);
    if (highest > round) return false;  // the others are ahead: meet them at their round
  }
  throw TransportError(fmt::format("{}: rank {}: no agreement on a ring of live ranks after {} "
                                   "tries", transport_.name(), transport_.rank(),
                                   live_.world_size() + 1));
}

std::int64_t LiveAllreduce::agree(std::int64_t round) {
  const int n = live_.world_size(), self = transport_.rank();
  const std::uint64_t number = live_.next_agreement();
  const transport::Tag tag = p2p_tag(Purpose::kAgreement, static_cast<std::int64_t>(number));
  // Message: the round (8 bytes), then one byte per rank, 1 if the sender believes it dead.
  const std::size_t bytes = 8 + static_cast<std::size_t>(n);
  std::vector<int> peers;
  for (int r : live_.live_ranks(round)) {
    if (r != self) peers.push_back(r);
  }
  std::vector<std::byte> out(bytes), in(bytes * std::max<std::size_t>(1, peers.size()));
  transport::store_le<std::uint64_t>(out.data(), static_cast<std::uint64_t>(round));
  for (int r : live_.dead_ranks()) out[8 + r] = std::byte{1};
  auto out_region = transport_.register_region(out);
  auto in_region = transport_.register_region(in);
  std::vector<transport::Request> recvs, sends;
  transport::CancelOnUnwind guard(transport_);
  guard.watch(recvs);
  guard.watch(sends);
  for (std::size_t k = 0; k < peers.size(); ++k) {
    recvs.push_back(transport_.recv(peers[k], tag, *in_region, {k * bytes, bytes}));
  }
  for (int r : peers) sends.push_back(transport_.send(r, tag, *out_region, {0, bytes}));
  // The others enter this agreement when their own ring fails, which may take them up to a
  // peer timeout for the ring they were in plus one for the next: wait for that and more.
  const auto deadline = transport::deadline_after(4 * live_.peer_timeout());
  std::int64_t highest = round;
  std::vector<bool> reported_dead(n, false);  // by an answer already in
  std::vector<bool> answered(peers.size(), false), given_up(peers.size(), false);
  auto take = [&](std::size_t k) {
    const std::byte* m = in.data() + k * bytes;
    highest = std::max(highest, static_cast<std::int64_t>(transport::load_le<std::uint64_t>(m)));
    if (m[8 + self] != std::byte{0}) live_.mark_dead(peers[k], "it counts this rank as dead");
    for (int r = 0; r < n; ++r) {
      if (m[8 + r] != std::byte{0} && r != self) reported_dead[r] = true;
    }
  };
  // Poll every answer at once: a silent rank that an answer already reports dead is not
  // waited for any longer.
  for (;;) {
    bool pending = false;
    for (std::size_t k = 0; k < peers.size(); ++k) {
      if (answered[k] || given_up[k]) continue;
      bool done = false, failed = false;
      try {
        done = transport_.test(recvs[k]);
        failed = done && recvs[k].state()->bytes != bytes;
      } catch (const TransportError&) {
        failed = true;
      }
      const bool late = transport::Clock::now() >= deadline || reported_dead[peers[k]];
      if (done && !failed) {
        answered[k] = true;
        take(k);
      } else if (failed || late) {
        given_up[k] = true;
        if (!recvs[k].state()->done) transport_.cancel(recvs[k]);
        live_.mark_dead(peers[k], "did not answer the agreement after a failed allreduce");
      } else {
        pending = true;
      }
    }
    if (!pending) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::vector<int> dead_by_them;
  for (int r = 0; r < n; ++r) {
    if (reported_dead[r]) dead_by_them.push_back(r);
  }
  for (int r : dead_by_them) live_.mark_dead(r, "a survivor lost it");
  for (auto& s : sends) {
    try {
      if (!transport_.wait(s, transport::deadline_after(live_.peer_timeout()))) transport_.cancel(s);
    } catch (const TransportError&) {
    }
  }
  log().info("rank {}: agreement {}: live ranks {}", self, number,
             fmt::join(live_.live_ranks(round), ","));
  return highest;
}

}  // namespace murmur::optimizers
