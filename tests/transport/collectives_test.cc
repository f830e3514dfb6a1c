// Collectives on every backend built, with 2, 4 and 8 ranks (threads for inproc, processes
// otherwise): ring allreduce against the exact sum, and the ring-neighbor exchange.
#include <catch2/catch.hpp>

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "tests/time_scale.h"
#include "tests/transport/backends.h"
#include "transport/collectives.h"
#include "transport/tag.h"

namespace murmur::transport::testing {
namespace {

// Rank r's element i: varied signs and magnitudes, reproducible on every rank.
float input(int rank, std::size_t i) {
  std::uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ (rank + 1) * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 29;
  return static_cast<float>(static_cast<std::int64_t>(h % 2001) - 1000) / 64.0f;
}

TEST_CASE("ring allreduce equals the exact sum within float rounding", "[transport][multiproc]") {
  auto backend = GENERATE(from_range(built_backends()));
  auto ranks = GENERATE(2, 4, 8);
  CAPTURE(backend, ranks);
  const std::vector<std::size_t> sizes{0, 1, 5, 1000003, 4u << 20};
  auto results = run_ranks(backend, ranks, [&](RankContext& ctx) {
    Transport& t = ctx.transport();
    CollectiveOptions options;
    options.timeout = murmur::testing::scaled(std::chrono::seconds(30));
    options.chunk_bytes = 64 << 10;
    RingAllreduce allreduce(t, options);
    for (std::size_t n : sizes) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        if (n > (1u << 20) && op == ReduceOp::kAverage) continue;  // one big run is enough
        std::vector<float> x(n);
        for (std::size_t i = 0; i < n; ++i) x[i] = input(ctx.rank(), i);
        auto region = t.register_region(std::as_writable_bytes(std::span(x)));
        allreduce.run(*region, x, op, TagLayout(t).make(purpose::kBenchmark, 7));
        // Every element of the small cases; a sample of the 16 MiB one (8 ranks on 2 cores).
        const std::size_t stride = n > (1u << 20) ? 61 : 1;
        for (std::size_t i = 0; i < n; i += stride) {
          double exact = 0, magnitude = 0;
          for (int q = 0; q < ctx.size(); ++q) {
            exact += input(q, i);
            magnitude += std::fabs(input(q, i));
          }
          if (op == ReduceOp::kAverage) {
            exact /= ctx.size();
            magnitude /= ctx.size();
          }
          // Each of the N-1 float additions (and the scaling) rounds by at most eps * |partial|.
          double bound = (ctx.size() + 1) * 6e-8 * magnitude + 1e-30;
          if (std::fabs(x[i] - exact) > bound) {
            throw std::runtime_error(fmt::format("n={} i={}: got {} want {}", n, i, x[i], exact));
          }
        }
      }
    }
  });
  INFO(failures(results));
  CHECK(failures(results).empty());
}

TEST_CASE("ring-neighbor exchange delivers left and right buffers", "[transport][multiproc]") {
  auto backend = GENERATE(from_range(built_backends()));
  auto ranks = GENERATE(2, 4, 8);
  CAPTURE(backend, ranks);
  auto results = run_ranks(backend, ranks, [&](RankContext& ctx) {
    Transport& t = ctx.transport();
    const int n = ctx.size(), r = ctx.rank();
    const int left = (r + n - 1) % n, right = (r + 1) % n;
    constexpr std::size_t kFloats = 300001;
    std::vector<float> mine(kFloats), theirs(2 * kFloats, -1.0f);
    for (std::size_t i = 0; i < kFloats; ++i) mine[i] = input(r, i);
    auto out = t.register_region(std::as_writable_bytes(std::span(mine)));
    auto in = t.register_region(std::as_writable_bytes(std::span(theirs)));
    const std::size_t bytes = kFloats * sizeof(float);
    std::vector<int> peers{left, right};
    if (n == 2) peers.pop_back();  // left and right are the same rank
    std::vector<ByteRange> ranges{{0, bytes}, {bytes, bytes}};
    ranges.resize(peers.size());
    for (int round = 0; round < 3; ++round) {
      auto got = neighbor_exchange(t, 100 + round, *out, {0, bytes}, peers, *in, ranges, peers);
      for (std::size_t p = 0; p < peers.size(); ++p) {
        MURMUR_CHECK(got[p] == bytes);
        for (std::size_t i = 0; i < kFloats; i += 997) {
          MURMUR_CHECK(theirs[p * kFloats + i] == input(peers[p], i));
        }
      }
    }
  });
  INFO(failures(results));
  CHECK(failures(results).empty());
}

}  // namespace
}  // namespace murmur::transport::testing
