// Neighborhood: who an averaging algorithm averages with, as the algorithm sees it. The algorithm
// asks whether a rank takes part, hands the Neighborhood every request it waits on and every
// exact average it needs, and never asks what happens when a peer is lost: that is the
// Neighborhood's policy. Strict (run.on_peer_failure: stop): everyone always takes part, a lost
// peer is a PeerLost that ends the run. Live (continue): the LiveSet decides who takes part; a
// peer that fails or stays silent is marked dead and the wait reports it; the exact average runs
// over the survivors, who agree on their ring (live_allreduce.h). Used by one thread at a time
// (the one that drives the transport).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "membership/live_set.h"
#include "transport/collectives.h"
#include "transport/float_ops.h"
#include "transport/transport.h"

namespace murmur::membership {

class Neighborhood {
 public:
  virtual ~Neighborhood() = default;

  transport::Transport& transport() const { return transport_; }
  // True iff rank `r` takes part in the averaging of `step` (this rank always does).
  virtual bool alive(int r, std::int64_t step) const = 0;
  // The ranks that take part at `step`, this one included, ascending.
  virtual std::vector<int> ranks(std::int64_t step) const = 0;
  // Waits for `request`; returns true iff it completed. Strict: throws PeerLost naming the peer
  // and `what` after transport.recv_timeout_ms. Live: false once its peer is found lost (a
  // failure, a silence of peer_timeout_ms, or recv_timeout_ms in all); the peer is then marked
  // dead and the request cancelled. ProtocolError and other errors throw in both.
  virtual bool wait(transport::Request& request, const char* what) = 0;
  // Drives progress on `request` once; true iff it is done. Strict: throws its failure. Live:
  // a failed request counts as done (wait() then reports it).
  virtual bool poll(transport::Request& request) = 0;
  // Replaces `data` (inside `region`) by the mean over the ranks that take part; every one of them
  // calls it with the same base tag (transport/tag.h) and round. Returns false iff this round's
  // average was skipped (live: the survivors met at a later round), with `data` as it was.
  virtual bool average(transport::Region& region, std::span<float> data, transport::Tag tag,
                       std::int64_t round) = 0;
  // average() for the state an algorithm hands over at a join round (joins_at(round)), given up
  // (false, `data` as it was) as soon as the join is off: the joining rank found dead again, or
  // taken back by only some, in an agreement. The ranks that never saw the join are at the
  // round's own average by then, where the others must meet them.
  virtual bool average_at_join(transport::Region& region, std::span<float> data,
                               transport::Tag tag, std::int64_t round) {
    return average(region, data, tag, round);
  }
  // True iff a rank takes part again from exactly `round` after an agreed rejoin (this one, or
  // one it takes back): an algorithm with state beyond the averaged data (diloco's outer model)
  // hands it over then. The same on every rank of that round. Strict: never.
  virtual bool joins_at(std::int64_t round) const { return false; }
  // True iff this rank is the one rejoining at `round`: it brings no such state.
  virtual bool rejoins_at(std::int64_t round) const { return false; }
  // The live set (continue), else nullptr: for the runtime and the rejoin protocol only.
  virtual LiveSet* live() { return nullptr; }

 protected:
  explicit Neighborhood(transport::Transport& transport) : transport_(transport) {}

 private:
  transport::Transport& transport_;
};

// Waits for `request` while its peer is heard (wait_heard: silent at most live.peer_timeout(),
// and at most live.message_timeout() in all); returns true iff it completed. Otherwise (a
// PeerLost, a silence or the timeout, after which the request is cancelled) marks its peer dead
// naming `what`, and returns false. The live Neighborhood's wait().
bool wait_live(transport::Transport& transport, transport::Request& request, LiveSet& live,
               const char* what);

// The policies run.on_peer_failure names: "stop" (a strict neighborhood: a lost peer ends the
// run) and "continue" (a live one).
std::vector<std::string_view> failure_policies();
// True iff `policy` is "continue". Throws ConfigError naming run.on_peer_failure for an unknown
// policy.
bool is_live(std::string_view policy);

// run.on_peer_failure: stop. `ops` does the exact average's arithmetic (the data's memory).
std::unique_ptr<Neighborhood> strict_neighborhood(transport::Transport& transport,
                                                  transport::CollectiveOptions options,
                                                  transport::FloatOps& ops);
// run.on_peer_failure: continue, over `live` (which must outlive the neighborhood).
std::unique_ptr<Neighborhood> live_neighborhood(transport::Transport& transport, LiveSet& live,
                                                transport::CollectiveOptions options,
                                                transport::FloatOps& ops);

}  // namespace murmur::membership
