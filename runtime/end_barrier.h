// await_everyone(): the meeting before the final average of an asynchronous algorithm. Its
// peers end their steps at their own pace (a quarter-speed straggler finishes minutes after the
// rest), far apart enough for the final average's receives, bounded by transport.recv_timeout_ms,
// to give up on a peer that is only slow. Here every rank of `ranks` reports to the lowest of them,
// which answers once all have; each wait lasts while its peer is heard (transport heartbeats:
// a live peer computing its last steps), and ends at a silence of transport.peer_timeout_ms
// (recv_timeout_ms on a backend that cannot tell, inproc). Stop mode only: every rank takes
// part and a silent one ends the run. (Continue mode needs no meeting: its live average already
// waits while a peer is heard, and its ranks may disagree on who is alive until that average
// has agreed.) Called by the thread that drives the transport, by every rank of `ranks`.
#pragma once

#include <vector>

#include "core/config.h"
#include "transport/transport.h"

namespace murmur::runtime {

// Throws PeerLost naming a peer that went silent or closed its connection.
void await_everyone(transport::Transport& transport, const TransportConfig& config,
                    const std::vector<int>& ranks);

}  // namespace murmur::runtime
