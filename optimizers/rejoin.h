// How a restarted peer comes back into a gossip run (run.on_peer_failure=continue; dpsgd, sgp,
// adpsgd). The restarted peer R sends a join request (its step) to the ranks it averages with.
// A live rank that holds R dead polls for such a request after every step (JoinResponder); on
// one, it answers with its step s and the step J = s + margin from which it takes R back, then
// a copy of its parameters, and revives R from J. R (rejoin()) waits up to the peer timeout for
// the answers, takes the mean of the parameters it got and the highest s as its own step, and
// revives each answerer from its J: each pair agrees on its J, so both sides add the edge back
// in the same round. Whoever does not answer stays dead to R. The margin (world size + 2 rounds)
// covers how far apart neighbors' steps can drift. Both classes are used by one thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "optimizers/live_set.h"
#include "transport/transport.h"

namespace murmur::optimizers {

class JoinResponder {
 public:
  JoinResponder(transport::Transport& transport, LiveSet& live, std::span<float> params,
                std::int64_t margin);
  ~JoinResponder();

  // Answers every dead rank whose join request has arrived, with the parameters as they are
  // now (copied: training goes on while the answer is sent). Never blocks on a dead rank.
  void poll(std::int64_t step);

 private:
  struct Asker {
    std::array<std::byte, 8> request{};
    std::unique_ptr<transport::Region> request_region;
    transport::Request pending;
  };
  transport::Transport& transport_;
  LiveSet& live_;
  std::span<float> params_;
  std::int64_t margin_;
  std::map<int, Asker> askers_;
  std::array<std::byte, 16> header_{};  // the answer: step, join step
  std::unique_ptr<transport::Region> header_region_;
  std::vector<float> copy_;  // the parameters being sent
  std::unique_ptr<transport::Region> copy_region_;
  std::vector<transport::Request> sending_;
};

struct RejoinResult {
  int answers = 0;        // how many ranks took us back
  std::int64_t step = 0;  // the step to go on from (ours if nobody answered)
};

// The restarted peer's side: asks `ranks`, waits up to live.peer_timeout() for their answers,
// writes the mean of their parameters into `params` (left as is if nobody answered), marks the
// silent ranks dead and revives the others from their join steps.
RejoinResult rejoin(transport::Transport& transport, LiveSet& live, std::span<const int> ranks,
                    std::span<float> params, std::int64_t step);

}  // namespace murmur::optimizers
