// How a restarted peer comes back into a run (run.on_peer_failure=continue). The restarted peer
// R sends a JoinRequest (its step) to every other rank, asking the ranks it averages with for
// their parameters too (a rank that held R's old process dead but never averages with it must
// still count the new one in the final average). A live rank that holds R dead
// polls for such a request after every step (JoinResponder); on one, it answers with a JoinAnswer
// (its step s, a join step J = clock + margin on the algorithm's clock, its agreement count and
// pace) and a copy of its parameters. R (rejoin()) waits for the answers, takes the mean of the
// parameters it got, the highest s as its own step and the highest agreement count. Whoever does
// not answer stays dead to R. Then, by the JoinStep:
// - kPerPair (gossip): each answerer revives R from its own J and R revives each from that J, so
//   both ends of an edge add it back in the same round.
// - kAgreed (the allreduce family): a ring needs every member to take R back at the same round,
//   and the answerers saw the request at different steps. R sends them all one JoinCommit, the
//   highest J proposed pushed further by the rounds each answerer can have run since R asked
//   (its pace), plus a second; each revives R from it, as R does them. An answerer keeps R dead
//   until the commit arrives, and refuses a commit for a round it has already passed (then R
//   trains alone).
// The margin: `drift` (how far apart neighbors' clocks can be: the graph's hops) plus what the
// answerer's fastest pace covers in one peer timeout (the time R may still need to gather the
// other answers, whose senders keep training meanwhile). The protocol moves host memory: the
// runtime copies parameters to and from the device. Both classes are used by one thread.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "membership/messages.h"
#include "membership/live_set.h"
#include "transport/transport.h"

namespace murmur::membership {

enum class JoinStep { kPerPair, kAgreed };

class JoinResponder {
 public:
  // `snapshot` writes the parameters as they are now into the host span it is given (`floats`
  // of them). `drift` is counted on the algorithm's clock.
  JoinResponder(transport::Transport& transport, LiveSet& live, std::size_t floats,
                std::function<void(std::span<float>)> snapshot, std::int64_t drift,
                JoinStep how = JoinStep::kPerPair);
  ~JoinResponder();

  // Answers every dead rank whose join request has arrived (copying the parameters: training
  // goes on while the answer is sent), and (kAgreed) takes back those whose commit has arrived.
  // `clock` is the algorithm's live_clock(step). Never blocks on a dead rank.
  void poll(std::int64_t step, std::int64_t clock);
  void poll(std::int64_t step) { poll(step, step); }
  // kAgreed: true while some rank has been answered and its commit has not arrived.
  bool awaiting_commit() const { return !committing_.empty(); }
  // True iff poll() has anything to do beside an overlapped exchange: a dead rank to listen
  // for, or a commit to wait for. (It also listens to the live ranks, whenever it is polled.)
  bool has_work() const { return awaiting_commit() || !live_.dead_ranks().empty(); }
  // True iff a join request from `r` has landed and not been answered yet: `r` was restarted,
  // and the connection to it is the new process's, not to be dropped for the old one's death,
  // nor waited for in an agreement (it answers none while it asks). Uses the Transport (it
  // listens for the request), so only the thread that drives it calls this: LiveSet's
  // on_dead hook and restart probe, set by the runtime.
  bool restarted(int r);
  // The margin an answer would propose now: drift + fastest pace x peer timeout.
  std::int64_t margin() const;

 private:
  struct Asker {
    std::array<std::byte, std::max(JoinRequest::kBytes, JoinCommit::kBytes)> message{};  // either
    std::unique_ptr<transport::Region> region;
    transport::Request pending;
  };
  void take_committed(std::int64_t clock);
  // Keeps a request receive posted for `r`; true iff a request has landed in it.
  bool listen(int r);
  // Keeps the fastest pace seen, in rounds per second over windows of at least half a second.
  void track_pace(std::int64_t clock);

  transport::Transport& transport_;
  LiveSet& live_;
  std::function<void(std::span<float>)> snapshot_;
  std::int64_t drift_;
  JoinStep how_;
  std::chrono::steady_clock::time_point window_start_;
  std::int64_t window_clock_ = -1;
  double fastest_pace_ = 0;           // rounds per second
  std::map<int, Asker> askers_;       // every other rank, a request receive posted for each
  std::map<int, Asker> committing_;   // kAgreed: answered, waiting for the commit
  std::array<std::byte, JoinAnswer::kBytes> answer_{};
  std::unique_ptr<transport::Region> answer_region_;
  std::vector<float> copy_;           // the parameters being sent
  std::unique_ptr<transport::Region> copy_region_;
  std::vector<transport::Request> sending_;
};

struct RejoinResult {
  int answers = 0;        // how many ranks took us back
  int models = 0;         // how many of them sent their parameters (the ones in `ranks`)
  std::int64_t step = 0;  // the step to go on from (ours if nobody answered)
};

// The restarted peer's side: asks `ranks` (the ones it averages with) and `also_tell` (the
// rest, who send no parameters: they only take it back, so that the final average and the
// agreements count it again), waits up to live.peer_timeout() x world size (x 3 for kAgreed)
// for their answers, writes the mean of the parameters of `ranks` into `params` (host memory;
// left as is if none of them answered), marks the silent ranks dead and revives the others
// from their join steps (kAgreed: from the one it commits to).
RejoinResult rejoin(transport::Transport& transport, LiveSet& live, std::span<const int> ranks,
                    std::span<float> params, std::int64_t step,
                    JoinStep how = JoinStep::kPerPair, std::span<const int> also_tell = {});

}  // namespace murmur::membership
