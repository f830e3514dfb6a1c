// The live set's bookkeeping: deaths marked once, a rank taken back from an agreed step, the
// agreements counted.
#include <catch2/catch.hpp>

#include <chrono>
#include <vector>

#include "membership/live_set.h"

namespace murmur::membership {
namespace {

using std::chrono::milliseconds;

TEST_CASE("a live set marks deaths once and takes a rank back from an agreed step", "[faults]") {
  LiveSet live(4, 1, milliseconds(100));
  CHECK(live.live_ranks(0) == std::vector<int>{0, 1, 2, 3});
  live.mark_dead(2, "test");
  const auto v = live.version();
  live.mark_dead(2, "again");  // idempotent
  CHECK(live.version() == v);
  live.mark_dead(1, "self");  // never itself
  CHECK(live.alive(1, 5));
  CHECK(live.dead(2));
  CHECK_FALSE(live.alive(2, 1000000));
  CHECK(live.live_ranks(7) == std::vector<int>{0, 1, 3});
  live.revive(2, 10);
  CHECK_FALSE(live.dead(2));
  CHECK_FALSE(live.alive(2, 9));
  CHECK(live.alive(2, 10));
  CHECK(live.dead_ranks().empty());
  CHECK(live.next_agreement() == 0);
  CHECK(live.next_agreement() == 1);
  CHECK(live.agreements() == 2);
}

}  // namespace
}  // namespace murmur::membership
