// The rejoin protocol (membership/rejoin.h) on its own, over inproc ranks: rank 0 restarts while
// ranks 1 and 2 hold it dead and poll at different clocks, as the ranks of a real run do. With
// JoinStep::kAgreed all three must take each other back at one join round (a ring needs that);
// with kPerPair each pair at its own. A commit for a round an answerer has passed is refused. A
// rank told only (not averaged with) takes the peer back and sends no parameters.
#include <catch2/catch.hpp>

#include <barrier>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "membership/live_set.h"
#include "membership/rejoin.h"
#include "tests/transport/backends.h"

namespace murmur::membership {
namespace {

using std::chrono::milliseconds;
using transport::testing::failures;
using transport::testing::RankContext;
using transport::testing::run_ranks;

constexpr std::int64_t kMargin = 5;

// Rank 0 rejoins; rank r (1, 2) answers while its clock is 10 * r and then keeps polling with
// that clock (or `late_clock` for rank 2, to make the commit arrive after its round) until
// rank 0 is back or 5 s pass. Returns, per rank, the step each other rank is alive from.
// With `tell_two`, rank 0 asks only rank 1 for its parameters and tells rank 2 (not a rank it
// averages with) to take it back.
void run(JoinStep how, std::int64_t late_clock,
         std::vector<std::vector<std::int64_t>>& alive_from, std::vector<float>& params0,
         bool tell_two = false) {
  alive_from.assign(3, std::vector<std::int64_t>(3, -1));
  params0.assign(4, 0.0f);
  std::barrier done(3);
  auto results = run_ranks("inproc", 3, [&](RankContext& ctx) {
    const int me = ctx.rank();
    LiveSet live(3, me, milliseconds(2000));
    std::vector<float> params(4, static_cast<float>(me));  // rank r's model: all r
    auto probe = [&](int r) {
      for (std::int64_t s = 0; s < 200; ++s) {
        if (live.alive(r, s)) return s;
      }
      return std::int64_t{-1};
    };
    if (me == 0) {
      const std::vector<int> ask = tell_two ? std::vector<int>{1} : std::vector<int>{1, 2};
      const std::vector<int> tell = tell_two ? std::vector<int>{2} : std::vector<int>{};
      const RejoinResult got = rejoin(ctx.transport(), live, ask, params, 7, how, tell);
      MURMUR_CHECK(got.answers == 2);
      MURMUR_CHECK(got.models == (tell_two ? 1 : 2));
      MURMUR_CHECK(got.step == 20);  // the highest step among the answers
      params0 = params;
    } else {
      live.mark_dead(0, "the test's restarted rank");
      const std::int64_t clock = 10 * me;
      JoinResponder responder(ctx.transport(), live, params.size(),
                              [&](std::span<float> out) { std::copy(params.begin(), params.end(), out.begin()); },
                              kMargin, how);
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (std::chrono::steady_clock::now() < until) {
        // A rank that has answered goes on training: rank 2's clock moves on to late_clock.
        const bool waiting = responder.awaiting_commit();
        responder.poll(clock, waiting && me == 2 ? late_clock : clock);
        if (!live.dead(0)) break;                              // taken back
        if (waiting && !responder.awaiting_commit()) break;    // the commit came, and was refused
        std::this_thread::sleep_for(milliseconds(1));
      }
    }
    for (int r = 0; r < 3; ++r) alive_from[me][r] = r == me ? 0 : probe(r);
    // Stay until every rank is done polling: a rank that finds another's transport gone marks
    // it dead (as a real run does when a peer exits).
    done.arrive_and_wait();
  });
  INFO(failures(results));
  REQUIRE(failures(results).empty());
}

TEST_CASE("an agreed rejoin takes the peer back at one round on every rank", "[faults]") {
  std::vector<std::vector<std::int64_t>> alive_from;
  std::vector<float> params0;
  run(JoinStep::kAgreed, 20, alive_from, params0);
  // Rank 1 proposed 10 + 5, rank 2 20 + 5; the test's ranks have no pace (their clocks stand
  // still), so the rejoining rank adds one round of slack: everyone uses 26.
  CHECK(alive_from[0][1] == 26);
  CHECK(alive_from[0][2] == 26);
  CHECK(alive_from[1][0] == 26);
  CHECK(alive_from[2][0] == 26);
  CHECK(alive_from[1][2] == 0);  // the two live ranks never dropped each other
  for (float v : params0) CHECK(v == 1.5f);  // the mean of the answers, 1 and 2
}

TEST_CASE("a per-pair rejoin takes the peer back at each answerer's own step", "[faults]") {
  std::vector<std::vector<std::int64_t>> alive_from;
  std::vector<float> params0;
  run(JoinStep::kPerPair, 20, alive_from, params0);
  CHECK(alive_from[0][1] == 15);
  CHECK(alive_from[1][0] == 15);
  CHECK(alive_from[0][2] == 25);
  CHECK(alive_from[2][0] == 25);
}

TEST_CASE("a per-pair rejoin tells a rank it does not average with, which sends no parameters",
          "[faults]") {
  std::vector<std::vector<std::int64_t>> alive_from;
  std::vector<float> params0;
  run(JoinStep::kPerPair, 20, alive_from, params0, /*tell_two=*/true);
  CHECK(alive_from[0][2] == 25);  // taken back both ways, at rank 2's own join step
  CHECK(alive_from[2][0] == 25);
  for (float v : params0) CHECK(v == 1.0f);  // rank 1's parameters alone
}

TEST_CASE("a commit for a round the answerer has passed leaves the peer out there", "[faults]") {
  std::vector<std::vector<std::int64_t>> alive_from;
  std::vector<float> params0;
  // Rank 2's clock jumps to 30 after it answers: the commit (26) comes too late for it.
  run(JoinStep::kAgreed, 30, alive_from, params0);
  CHECK(alive_from[1][0] == 26);
  CHECK(alive_from[2][0] == -1);  // still dead to rank 2
}

}  // namespace
}  // namespace murmur::membership
