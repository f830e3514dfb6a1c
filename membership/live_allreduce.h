// Ring allreduce over the live ranks that outlives a rank's death (run.on_peer_failure=continue),
// for the live Neighborhood's exact average (allreduce, local_sgd, diloco, and the runtime's
// final average). A rank whose ring fails (PeerLost, a timeout, or a ring of another shape)
// restores its data and enters an agreement (agreement.h). A failed ring stalls every other
// member's next ring, so every survivor enters the same agreement. Rounds agree too: the ranks at
// the highest round seen retry it, the others skip their (older) round's average and meet them
// there. Used by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "membership/live_set.h"
#include "transport/collectives.h"
#include "transport/float_ops.h"
#include "transport/transport.h"

namespace murmur::membership {

class LiveAllreduce {
 public:
  // `ops` holds the backup of the data and does the ring's sums (the data's kind of memory).
  LiveAllreduce(transport::Transport& transport, LiveSet& live,
                transport::CollectiveOptions options, transport::FloatOps& ops);

  // Replaces `data` (inside `region`) by the mean over the live ranks; every live rank calls it
  // with the same round and base tag (transport/tag.h; its epoch field counts the agreements,
  // so rings of different agreements never exchange a message). Returns false if this round's
  // average was skipped (the survivors met at a later round); `data` is then left as it was.
  // Throws TransportError if no agreement is reached after world_size tries. With `wanted`,
  // also gives up (false) after an agreement once wanted() is false: the average is one that
  // only some rounds hold (a rejoin's hand-over), and the others have gone on without it.
  bool average(transport::Region& region, std::span<float> data, transport::Tag tag,
               std::int64_t round, const std::function<bool()>& wanted = {});

 private:
  transport::Transport& transport_;
  LiveSet& live_;
  transport::FloatOps& ops_;
  transport::Allreduce allreduce_;
  transport::FloatOps::Scratch backup_;
};

}  // namespace murmur::membership
