// What a lost peer means, decided in one place (membership/neighborhood.h): over inproc ranks, a
// peer that never sends is a PeerLost for a strict neighborhood and a dead rank for a live one,
// whose wait then returns false; the policy names are checked.
#include <catch2/catch.hpp>

#include <chrono>

#include "core/error.h"
#include "membership/live_set.h"
#include "membership/neighborhood.h"
#include "tests/time_scale.h"
#include "transport/inproc/transport.h"

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

TEST_CASE("run.on_peer_failure names a policy", "[membership]") {
  CHECK_FALSE(is_live("stop"));
  CHECK(is_live("continue"));
  CHECK_THROWS_WITH(is_live("retry"), Catch::Contains("run.on_peer_failure") &&
                                          Catch::Contains("stop | continue"));
}

}  // namespace
}  // namespace murmur::membership
