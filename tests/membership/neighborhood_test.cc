// What a lost peer means, decided in one place (membership/neighborhood.h): over inproc ranks, a
// peer that never sends is a PeerLost for a strict neighborhood and a dead rank for a live one,
// whose wait then returns false; the policy names are checked.
#include <catch2/catch.hpp>

#include <chrono>
#include <span>
#include <vector>

#include "core/error.h"
#include "membership/live_set.h"
#include "membership/neighborhood.h"
#include "tests/time_scale.h"
#include "tests/transport/backends.h"
#include "transport/inproc/transport.h"
#include "transport/tag.h"

namespace murmur::membership {
namespace {

using std::chrono::milliseconds;

TEST_CASE("a strict neighborhood makes a silent peer a PeerLost", "[membership]") {
  auto world = transport::inproc::make_world(2);
  transport::CollectiveOptions options;
  options.timeout = milliseconds(200);
  auto hood = strict_neighborhood(*world[0], options, transport::host_float_ops());
  CHECK(hood->alive(1, 0));
  CHECK(hood->ranks(0) == std::vector<int>{0, 1});
  CHECK(hood->live() == nullptr);
  std::vector<std::byte> buffer(16);
  auto region = world[0]->register_region(buffer);
  auto request = world[0]->recv(1, 7, *region, {0, 16});  // rank 1 never sends
  CHECK_THROWS_AS(hood->wait(request, "a test receive"), PeerLost);
}

TEST_CASE("a live neighborhood drops a silent peer and goes on", "[membership]") {
  auto world = transport::inproc::make_world(3);
  LiveSet live(3, 0, milliseconds(200), milliseconds(400));
  auto hood = live_neighborhood(*world[0], live, {}, transport::host_float_ops());
  std::vector<std::byte> buffer(16);
  auto region = world[0]->register_region(buffer);
  auto request = world[0]->recv(2, 7, *region, {0, 16});  // rank 2 never sends
  CHECK_FALSE(hood->wait(request, "a test receive"));
  CHECK(live.dead(2));
  CHECK_FALSE(hood->alive(2, 0));
  CHECK(hood->ranks(0) == std::vector<int>{0, 1});
  CHECK(hood->live() == &live);

  // A message that does come is waited for as usual.
  std::vector<std::byte> payload(16, std::byte{5});
  auto from = world[1]->register_region(payload);
  auto sent = world[1]->send(0, 8, *from, {0, 16});
  auto got = world[0]->recv(1, 8, *region, {0, 16});
  CHECK(hood->wait(got, "a test receive"));
  CHECK(buffer[3] == std::byte{5});
  CHECK(world[1]->wait(sent, transport::deadline_after(murmur::testing::scaled(std::chrono::milliseconds(2000)))));
}

TEST_CASE("a hand-over average at a join that is off is given up for the round's own",
          "[membership][faults]") {
  // Ranks 0 and 1 believe a rank joins at round 5 and average its hand-over state first; rank 2
  // took nobody back and is at the round's own average. Their rings cannot meet; after the
  // agreement, 0 and 1 find no join at round 5 (joins_at) and give the hand-over up, and all
  // three meet at the round's average. (Retried, the hand-over would never meet rank 2's ring:
  // the run would end with "no agreement".)
  auto results = transport::testing::run_ranks("inproc", 3, [](transport::testing::RankContext& ctx) {
    auto& t = ctx.transport();
    const int r = ctx.rank();
    LiveSet live(3, r, murmur::testing::scaled(milliseconds(300)));
    auto hood = live_neighborhood(t, live, {}, transport::host_float_ops());
    const transport::TagLayout layout(t);
    std::vector<float> data(64, static_cast<float>(r));
    auto region = t.register_region(std::as_writable_bytes(std::span(data)));
    if (r != 2) {
      const bool handed = hood->average_at_join(*region, data,
                                                layout.make(transport::purpose::kJoinState, 5), 5);
      MURMUR_CHECK(!handed);
      MURMUR_CHECK(data[0] == static_cast<float>(r));  // left as it was
    }
    MURMUR_CHECK(hood->average(*region, data, layout.make(transport::purpose::kBenchmark, 5), 5));
    MURMUR_CHECK(data[0] == 1.0f && data[63] == 1.0f);
    MURMUR_CHECK(live.live_ranks(5) == (std::vector<int>{0, 1, 2}));
  });
  INFO(transport::testing::failures(results));
  CHECK(transport::testing::failures(results).empty());
}

TEST_CASE("run.on_peer_failure names a policy", "[membership]") {
  CHECK_FALSE(is_live("stop"));
  CHECK(is_live("continue"));
  CHECK_THROWS_WITH(is_live("retry"), Catch::Contains("run.on_peer_failure") &&
                                          Catch::Contains("stop | continue"));
}

}  // namespace
}  // namespace murmur::membership
