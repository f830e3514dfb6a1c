// The survivors' agreement after a failed allreduce ring (live_allreduce.h), with no
// coordinator: each rank sends its round and the ranks it believes dead to every rank it believes
// alive, and waits a bounded time for theirs. Whoever does not answer is dead; the dead sets are
// merged (a union) into the LiveSet. Agreements are counted (LiveSet::next_agreement): the n-th
// agreement of each rank meets the n-th of the others. Used by one thread at a time.
#pragma once

#include <cstdint>

#include "membership/live_set.h"
#include "membership/messages.h"
#include "transport/transport.h"

namespace murmur::membership {

// Runs one agreement for a rank at `round`: afterwards `live` holds the merged view. Returns the
// highest round among the ranks that answered (at least `round`). Waits for each answer up to
// 4 x live.peer_timeout(), and no longer for a rank an answer already reports dead.
std::int64_t agree(transport::Transport& transport, LiveSet& live, std::int64_t round);

}  // namespace murmur::membership
