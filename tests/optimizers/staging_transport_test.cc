// The StagingTransport (optimizers/staging_transport.h) over every backend: device memory cut in
// pieces of chunk_bytes arrives whole and in place, a message of another size is a
// ProtocolError, a multi-piece message needs a base tag, pieces grow where the tag's chunk
// field could not number them, and a cancel leaves nothing in flight.
#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

#include "core/error.h"
#include "device/device.h"
#include "optimizers/device_arrays.h"
#include "optimizers/staging_transport.h"
#include "tests/time_scale.h"
#include "tests/transport/backends.h"
#include "transport/collectives.h"
#include "transport/inproc/transport.h"
#include "transport/tag.h"

namespace murmur::optimizers {
namespace {

namespace tt = transport::testing;

constexpr std::size_t kChunk = 4096;

transport::Deadline soon() {
  return transport::deadline_after(murmur::testing::scaled(std::chrono::milliseconds(20000)));
}

TEST_CASE("staged messages arrive whole, in pieces, over every backend", "[staging]") {
  const auto backend = GENERATE(from_range(tt::built_backends()));
  CAPTURE(backend);
  auto results = tt::run_ranks(backend, 2, [&](tt::RankContext& ctx) {
    auto device = device::make_offhost_cpu();
    StagingTransport t(ctx.transport(), *device, kChunk);
    MURMUR_CHECK(t.staged());
    MURMUR_CHECK(t.piece_bytes(20000) == kChunk);
    const transport::TagLayout layout(t);
    // 10001 floats: 10 pieces, the last of 3988 bytes; sent from an offset inside the array.
    const std::size_t n = 10001, offset = 7;
    device::Array array = device->zeros(offset + n);
    auto region = register_array(t, *device, array.span());
    const transport::Tag tag = layout.make(transport::purpose::kBenchmark, 3);
    const transport::ByteRange range{offset * sizeof(float), n * sizeof(float)};
    if (ctx.rank() == 0) {
      std::iota(array.data(), array.data() + offset + n, 0.0f);
      auto q = t.send(1, tag, *region, range);
      MURMUR_CHECK(t.wait(q, soon()));
      MURMUR_CHECK(q.state()->bytes == n * sizeof(float));
    } else {
      auto q = t.recv(0, tag, *region, range);
      MURMUR_CHECK(t.wait(q, soon()));
      MURMUR_CHECK(q.state()->bytes == n * sizeof(float));
      for (std::size_t i = 0; i < offset; ++i) MURMUR_CHECK(array.data()[i] == 0.0f);
      for (std::size_t i = offset; i < offset + n; ++i) {
        MURMUR_CHECK(array.data()[i] == static_cast<float>(i));
      }
    }
  });
  INFO(tt::failures(results));
  CHECK(tt::failures(results).empty());
}

TEST_CASE("a staged message of another size is a ProtocolError naming the sender", "[staging]") {
  auto results = tt::run_ranks("tcp", 2, [&](tt::RankContext& ctx) {
    auto device = device::make_offhost_cpu();
    StagingTransport t(ctx.transport(), *device, kChunk);
    device::Array array = device->zeros(3000);
    auto region = register_array(t, *device, array.span());
    const transport::Tag tag = transport::TagLayout(t).make(transport::purpose::kBenchmark, 1);
    if (ctx.rank() == 0) {
      auto q = t.send(1, tag, *region, {0, 3000 * sizeof(float)});  // 3 pieces, the last 3808 B
      t.wait(q, soon());
    } else {
      auto q = t.recv(0, tag, *region, {0, 2500 * sizeof(float)});  // the last piece: 1808 B
      bool refused = false;
      try {
        t.wait(q, soon());
      } catch (const ProtocolError& e) {
        refused = std::string(e.what()).find("rank 0") != std::string::npos ||
                  std::string(e.what()).find("longer") != std::string::npos;
      }
      MURMUR_CHECK(refused);
      MURMUR_CHECK(q.state()->done);  // given up whole: no piece left in flight
    }
  });
  INFO(tt::failures(results));
  CHECK(tt::failures(results).empty());
}

TEST_CASE("pieces need a base tag, and grow where the chunk field is too narrow", "[staging]") {
  auto world = transport::inproc::make_world(2);
  auto device = device::make_offhost_cpu();
  StagingTransport t(*world[0], *device, kChunk);
  const transport::TagLayout layout(t);
  device::Array array = device->zeros(2048);
  auto region = register_array(t, *device, array.span());
  const transport::Tag not_base = layout.with(layout.make(transport::purpose::kBenchmark, 1), 2, 0);
  CHECK_THROWS_AS(t.send(1, not_base, *region, {0, 8192}), Error);  // 2 pieces
  CHECK_THROWS_AS(t.send(1, layout.make(5, 0), *region, {1, 8}), Error);  // not whole floats
  // A message the chunk field could not number in pieces of kChunk takes bigger pieces.
  const std::size_t huge = (layout.max_chunks() + 1) * kChunk;
  CHECK(t.piece_bytes(huge) > kChunk);
  CHECK((huge + t.piece_bytes(huge) - 1) / t.piece_bytes(huge) <= layout.max_chunks());
  // A cancelled staged receive is done, with nothing left posted to the real transport.
  auto q = t.recv(1, layout.make(transport::purpose::kBenchmark, 2), *region, {0, 8192});
  t.cancel(q);
  CHECK(q.state()->done);
  CHECK_THROWS_AS(t.test(q), TransportError);
}

}  // namespace
}  // namespace murmur::optimizers
