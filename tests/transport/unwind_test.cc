// A collective that fails must leave nothing posted behind it: the caller unwinds and frees its
// buffers, and a message that arrives later must not be written into them.
#include <catch2/catch.hpp>

#include <array>
#include <cstddef>
#include <vector>

#include "core/error.h"
#include "tests/time_scale.h"
#include "transport/collectives.h"
#include "transport/inproc/transport.h"

namespace murmur::transport {
namespace {

TEST_CASE("a failed neighbor exchange cancels the receives it left posted", "[transport]") {
  auto world = inproc::make_world(3);
  std::vector<std::byte> out(16), in(32);
  auto from = world[0]->register_region(out);
  auto into = world[0]->register_region(in);
  const std::array<int, 2> sources = {1, 2};
  const std::array<ByteRange, 2> ranges = {ByteRange{0, 16}, ByteRange{16, 16}};
  CollectiveOptions options;
  options.timeout = std::chrono::milliseconds(50);
  // Rank 1 never answers: the exchange throws while the receive from rank 2 is still posted.
  CHECK_THROWS_AS(neighbor_exchange(*world[0], 7, *from, {0, 0}, {}, *into, ranges, sources, options),
                  PeerLost);

  // Rank 2's message, sent only now, must reach a fresh receive, not the abandoned one.
  std::vector<std::byte> payload(16, std::byte{0x5A}), fresh(16);
  auto payload_region = world[2]->register_region(payload);
  auto fresh_region = world[0]->register_region(fresh);
  Request send = world[2]->send(0, 7, *payload_region, {0, 16});
  Request recv = world[0]->recv(2, 7, *fresh_region, {0, 16});
  REQUIRE(world[0]->wait(recv, deadline_after(murmur::testing::scaled(std::chrono::seconds(5)))));
  CHECK(fresh[0] == std::byte{0x5A});
  CHECK(in[16] == std::byte{0});
  CHECK(world[2]->wait(send, deadline_after(murmur::testing::scaled(std::chrono::seconds(5)))));
}

}  // namespace
}  // namespace murmur::transport
