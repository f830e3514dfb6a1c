// Ring allreduce over the live ranks that outlives a rank's death (run.on_peer_failure=continue),
// for allreduce, local_sgd, diloco and the runtime's final average. There is no coordinator, so
// the survivors agree on the new ring by themselves: a rank whose ring fails (PeerLost, a
// timeout, or a ring of another shape) restores its data and enters an agreement: it sends its
// round and the ranks it believes dead to every rank it believes alive, and waits a bounded time
// for theirs. Whoever does not answer is dead; the dead sets are merged (a union). A failed ring
// stalls every other member's next ring, so every survivor enters the same agreement (they are
// counted: the n-th agreement of each rank meets the n-th of the others). Rounds agree too: the
// ranks at the highest round seen retry it, the others skip their (older) round's average and
// meet them there. Used by one thread at a time.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "optimizers/live_set.h"
#include "transport/collectives.h"
#include "transport/transport.h"

namespace murmur::optimizers {

class LiveAllreduce {
 public:
  LiveAllreduce(transport::Transport& transport, LiveSet& live,
                transport::CollectiveOptions options);

  // Replaces `data` (inside `region`) by the mean over the live ranks; every live rank calls it
  // with the same round and tag (< 2^32; bits 20..23 are xored with the agreement count). Returns false
  // if this round's average was skipped (the survivors met at a later round); `data` is then
  // left as it was. Throws TransportError if no agreement is reached after world_size tries.
  bool average(transport::Region& region, std::span<float> data, transport::Tag tag,
               std::int64_t round);

 private:
  // Returns the highest round among the ranks that answered.
  std::int64_t agree(std::int64_t round);

  transport::Transport& transport_;
  LiveSet& live_;
  transport::RingAllreduce ring_;
  std::vector<float> backup_;
};

}  // namespace murmur::optimizers
