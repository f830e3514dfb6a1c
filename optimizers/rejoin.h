// How a restarted peer comes back into a run (run.on_peer_failure=continue). The restarted peer
// R sends a join request (its step) to the ranks it averages with. A live rank that holds R dead
// polls for such a request after every step (JoinResponder); on one, it answers with its step s,
// a join step J = clock + margin (clock: the algorithm's live_clock(s)), its agreement count,
// and a copy of its parameters. R (rejoin()) waits up to the peer timeout for the answers, takes
// the mean of the parameters it got, the highest s as its own step and the highest agreement
// count. Whoever does not answer stays dead to R. Then, by the JoinStep:
// - kPerPair (gossip: dpsgd, sgp, adpsgd): each answerer revives R from its own J and R revives
//   each from that J, so both ends of an edge add it back in the same round. The margin (world
//   size + 2 rounds, and slack) covers how far apart neighbors' steps can drift.
// - kAgreed (the allreduce family: allreduce, local_sgd, diloco): a ring needs every member to
//   take R back at the same round, and the answerers saw the request at different steps. R
//   sends them all one commit, the highest J proposed; each revives R from it, as R does them.
//   An answerer keeps R dead until the commit arrives, and refuses a commit for a round it has
//   already passed (then R trains alone). Rings move fast, and R may wait long for its answers
//   (the survivors of a death may still be agreeing on their ring when R restarts; R waits up
//   to 3x its gossip patience), so each answer carries the answerer's fastest pace (rounds per
//   second over half-second windows) and R adds, for each, the rounds it can have run since R
//   asked, plus a second.
// Both classes are used by one thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "optimizers/live_set.h"
#include "transport/transport.h"

namespace murmur::optimizers {

enum class JoinStep { kPerPair, kAgreed };

class JoinResponder {
 public:
  JoinResponder(transport::Transport& transport, LiveSet& live, std::span<float> params,
                std::int64_t margin, JoinStep how = JoinStep::kPerPair);
  ~JoinResponder();

  // Answers every dead rank whose join request has arrived, with the parameters as they are
  // now (copied: training goes on while the answer is sent), and (kAgreed) takes back those
  // whose commit has arrived. `clock` is the algorithm's live_clock(step). Never blocks on a
  // dead rank.
  void poll(std::int64_t step, std::int64_t clock);
  void poll(std::int64_t step) { poll(step, step); }
  // kAgreed: true while some rank has been answered and its commit has not arrived.
  bool awaiting_commit() const { return !committing_.empty(); }

 private:
  struct Asker {
    std::array<std::byte, 8> request{};
    std::unique_ptr<transport::Region> request_region;
    transport::Request pending;
  };
  void take_committed(std::int64_t clock);

  // Keeps the fastest pace seen, in rounds per second over windows of at least half a second.
  void track_pace(std::int64_t clock);

  JoinStep how_;
  std::map<int, Asker> committing_;  // kAgreed: answered, waiting for the commit (8 bytes)
  std::chrono::steady_clock::time_point window_start_;
  std::int64_t window_clock_ = -1;
  double fastest_pace_ = 0;  // rounds per second
  transport::Transport& transport_;
  LiveSet& live_;
  std::span<float> params_;
  std::int64_t margin_;
  std::map<int, Asker> askers_;
  // The answer: step, join step, agreement count, fastest pace (milli-rounds per second).
  std::array<std::byte, 32> header_{};
  std::unique_ptr<transport::Region> header_region_;
  std::vector<float> copy_;  // the parameters being sent
  std::unique_ptr<transport::Region> copy_region_;
  std::vector<transport::Request> sending_;
};

struct RejoinResult {
  int answers = 0;        // how many ranks took us back
  std::int64_t step = 0;  // the step to go on from (ours if nobody answered)
};

// The restarted peer's side: asks `ranks`, waits up to live.peer_timeout() x world size for
// their answers, writes the mean of their parameters into `params` (left as is if nobody
// answered), marks the silent ranks dead and revives the others from their join steps (kAgreed:
// from the one it commits to).
RejoinResult rejoin(transport::Transport& transport, LiveSet& live, std::span<const int> ranks,
                    std::span<float> params, std::int64_t step,
                    JoinStep how = JoinStep::kPerPair);

}  // namespace murmur::optimizers
