// exchange(): the neighbor exchange of the gossip algorithms. Sends range `out` of `from` to every
// rank of send_to and receives one message from each rank of recv_from into slots 0, 1, ...,
// all under `tag`, waiting through the Neighborhood (membership/neighborhood.h), so that what a
// lost neighbor means is the Neighborhood's policy, not the algorithm's. Receives are posted
// first, so no message waits in an unexpected-message buffer. Called by the thread that drives
// the transport.
#pragma once

#include <cstddef>
#include <limits>
#include <span>
#include <vector>

#include "membership/neighborhood.h"
#include "optimizers/recv_slots.h"
#include "transport/transport.h"

namespace murmur::optimizers {

// What exchange() reports for a neighbor the Neighborhood gave up (live mode only).
inline constexpr std::size_t kLost = std::numeric_limits<std::size_t>::max();

// Returns, per rank of recv_from, the bytes that arrived in its slot, or kLost. Throws what
// Neighborhood::wait throws (PeerLost, strict), and ProtocolError naming the sender if
// `exact_size` and a message is not exactly slots.floats() floats long.
std::vector<std::size_t> exchange(membership::Neighborhood& hood, transport::Tag tag,
                                  const transport::Region& from, transport::ByteRange out,
                                  std::span<const int> send_to, RecvSlots& slots,
                                  std::span<const int> recv_from, bool exact_size = true);

}  // namespace murmur::optimizers
