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

#include "device/device.h"
#include "membership/neighborhood.h"
#include "optimizers/recv_slots.h"
#include "topology/mixing.h"
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

// After exchange() under the mixing m: x <- W_ii x + sum_k W_ik slot_k (Lian et al. 2017,
// Algorithm 1, line 6), a neighbor lost in the exchange giving its weight back to x, as
// renormalize() gives back a dropped one's. `inputs` and `weights` are the caller's scratch,
// kept to spare an allocation per round.
void mix_received(device::Device& device, std::span<float> x, const topology::RankMixing& m,
                  std::span<const std::size_t> got, RecvSlots& slots,
                  std::vector<const float*>& inputs, std::vector<float>& weights);

}  // namespace murmur::optimizers
