#include "membership/live_allreduce.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/logging.h"
#include "membership/agreement.h"
#include "transport/tag.h"

namespace murmur::membership {

namespace {

// A ring waits on each member for the peer timeout, heard or not (unlike the gossip algorithms'
// wait_live): a member that has left a broken ring for the agreement is alive and sends
// heartbeats, but will never send its part. Waiting for it longer kept the others out of the
// agreement until it had given up on them. A slow member that misses the peer timeout is not
// lost either: it answers the agreement, and the ring is tried again.
transport::CollectiveOptions with_timeout(transport::CollectiveOptions o, const LiveSet& live) {
  o.timeout = live.peer_timeout();
  return o;
}

}  // namespace

LiveAllreduce::LiveAllreduce(transport::Transport& transport, LiveSet& live,
                             transport::CollectiveOptions options, transport::FloatOps& ops)
    : transport_(transport), live_(live), ops_(ops), allreduce_(transport, with_timeout(options, live), ops) {}

bool LiveAllreduce::average(transport::Region& region, std::span<float> data, transport::Tag tag,
                            std::int64_t round, const std::function<bool()>& wanted) {
  if (backup_.floats.size() < data.size()) {
    backup_.region.reset();
    backup_ = ops_.scratch(transport_, data.size());
  }
  const std::span<float> backup = backup_.floats.first(data.size());
  ops_.copy(backup, data);
  const transport::TagLayout layout(transport_);
  for (int attempt = 0; attempt <= live_.world_size(); ++attempt) {
    const std::vector<int> ranks = live_.live_ranks(round);
    if (ranks.size() == 1) return true;  // alone: the mean is our own model
    allreduce_.set_ranks(ranks);
    try {
      allreduce_.run(region, data, transport::ReduceOp::kAverage,
                layout.with_epoch(tag, static_cast<unsigned>(live_.agreements())));
      return true;
    } catch (const TransportError& e) {
      // PeerLost or a timeout, or a ring of another shape (a ProtocolError on sizes): the ring
      // is broken somewhere; which rank is at fault is for the agreement to find out.
      log().warn("rank {}: allreduce of round {} over {} ranks failed ({}); agreeing with the "
                 "survivors on a new ring", transport_.rank(), round, ranks.size(), e.what());
    }
    ops_.copy(data, backup);
    const std::int64_t highest = agree(transport_, live_, round);
    if (highest > round) return false;  // the others are ahead: meet them at their round
    if (wanted && !wanted()) return false;  // the others are at the round's own average
  }
  throw TransportError(fmt::format("{}: rank {}: no agreement on a ring of live ranks after {} "
                                   "tries", transport_.name(), transport_.rank(),
                                   live_.world_size() + 1));
}

}  // namespace murmur::membership
