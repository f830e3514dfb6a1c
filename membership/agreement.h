// The survivors' agreement after a failed allreduce ring (live_allreduce.h), with no
// coordinator: each rank sends its round and the ranks it believes dead to every rank it believes
// alive, and waits a bounded time for theirs. Whoever does not answer is dead, and so is a rank
// that no answer shows alive but some answer reports dead. Ranks that answered but accuse each
// other (a peer that was frozen and dropped, then continued, reports its droppers dead as they
// report it) are settled by count: the one accused by the most of those still standing goes
// first (the higher rank on a tie), until no accusation is left among them. Agreements are
// counted (LiveSet::next_agreement): the n-th agreement of each rank meets the n-th of the
// others. Used by one thread at a time.
#pragma once

#include <cstdint>

#include "membership/live_set.h"
#include "membership/messages.h"
#include "transport/transport.h"

namespace murmur::membership {

// Runs one agreement for a rank at `round`: afterwards `live` holds the merged view. Returns the
// highest round among the ranks that answered (at least `round`). Waits for each answer up to
// 4 x live.peer_timeout(), and no longer for a rank that most of the other answers expected
// already report dead.
std::int64_t agree(transport::Transport& transport, LiveSet& live, std::int64_t round);

}  // namespace murmur::membership
