// The 16-bit ring allreduce (algorithm.wire): fp32 sums of 16-bit messages, within the rounding
// of the format and bitwise the same on every rank, exact where the inputs and sums fit the
// format, half the fp32 ring's bytes; a message of the wrong size refused before it is used.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "core/half.h"
#include "tests/time_scale.h"
#include "tests/transport/backends.h"
#include "transport/collectives.h"
#include "transport/half_ring_allreduce.h"
#include "transport/tag.h"

namespace murmur::transport::testing {
namespace {

CollectiveOptions options(std::size_t chunk_bytes = 1 << 20) {
  CollectiveOptions o;
  o.timeout = murmur::testing::scaled(std::chrono::seconds(30));
  o.chunk_bytes = chunk_bytes;
  return o;
}

// Rank r's entry i: varied magnitudes and signs, reproducible on every rank.
float value(int r, std::size_t i) {
  return static_cast<float>(std::sin(0.37 * static_cast<double>(i) + r) * std::exp2(static_cast<int>(i % 9) - 4));
}

TEST_CASE("16-bit ring allreduce: fp32 sums within the format's rounding, the same on every rank",
          "[transport][multiproc]") {
  auto backend = GENERATE(from_range(built_backends()));
  auto ranks = GENERATE(1, 2, 3, 5);
  CAPTURE(backend, ranks);
  auto results = run_ranks(backend, ranks, [&](RankContext& ctx) {
    Transport& t = ctx.transport();
    const TagLayout layout(t);
    const int N = ctx.size();
    int round = 0;
    // 3 (< 5 ranks: empty segments), odd, and several chunks of 4 KiB.
    for (std::size_t n : {std::size_t{3}, std::size_t{1001}, std::size_t{20000}}) {
      for (HalfFormat format : {HalfFormat::kFp16, HalfFormat::kBf16}) {
        for (bool stochastic : {false, true}) {
          for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
            HalfRingAllreduce allreduce(t, options(4096), format, stochastic, 5);
            std::vector<float> x(n);
            for (std::size_t i = 0; i < n; ++i) x[i] = value(ctx.rank(), i);
            const std::uint64_t before = t.bytes_sent();
            allreduce.run(x, op, layout.make(purpose::kBenchmark, ++round));
            const std::uint64_t sent = t.bytes_sent() - before;
            // Each partial sum is rounded once per hop and the total once more: N roundings of
            // at most one unit in the last place (2^-10 fp16, 2^-7 bf16, relative).
            const double u = format == HalfFormat::kBf16 ? 0x1p-7 : 0x1p-10;
            const double scale = op == ReduceOp::kAverage ? 1.0 / N : 1.0;
            for (std::size_t i = 0; i < n; ++i) {
              double want = 0, magnitude = 0;
              for (int q = 0; q < N; ++q) {
                want += value(q, i);
                magnitude += std::fabs(value(q, i));
              }
              // (and fp16's subnormal spacing, 2^-24, for the smallest)
              const double bound = N == 1 ? 0.0 : (N + 1) * (u * magnitude * scale + 0x1p-24);
              if (std::fabs(x[i] - want * scale) > bound) {
                throw std::runtime_error(fmt::format("n={} i={}: got {} want {} (bound {})", n, i,
                                                     x[i], want * scale, bound));
              }
              // What every rank holds is a 16-bit value, widened.
              if (N > 1) MURMUR_CHECK(from_half(to_half(x[i], format), format) == x[i]);
            }
            // Half the fp32 ring's bytes: 2(N-1) segments of 2 bytes per value.
            if (N > 1) {
              MURMUR_CHECK(sent <= 2 * 2 * (N - 1) * ((n + N - 1) / N));
              MURMUR_CHECK(sent >= 2 * 2 * (N - 1) * (n / N));
            }
            check_same_as_neighbors(t, x, every_rank(N), layout.make(purpose::kBenchmark, ++round));
          }
        }
      }
    }
  });
  INFO(failures(results));
  CHECK(failures(results).empty());
}

TEST_CASE("16-bit ring allreduce is exact where the values and sums fit the format",
          "[transport]") {
  // Small integers: every partial sum is representable in fp16 (to 2048) and bf16 (to 256), so
  // the 16-bit wire loses nothing, with either rounding.
  auto results = run_ranks("inproc", 4, [&](RankContext& ctx) {
    Transport& t = ctx.transport();
    const TagLayout layout(t);
    int round = 0;
    for (HalfFormat format : {HalfFormat::kFp16, HalfFormat::kBf16}) {
      for (bool stochastic : {false, true}) {
        HalfRingAllreduce allreduce(t, options(), format, stochastic, 9);
        std::vector<float> x(777);
        for (std::size_t i = 0; i < x.size(); ++i) {
          x[i] = static_cast<float>((ctx.rank() + 1) * static_cast<int>(i % 13) - 20);
        }
        allreduce.run(x, ReduceOp::kSum, layout.make(purpose::kBenchmark, ++round));
        for (std::size_t i = 0; i < x.size(); ++i) {
          MURMUR_CHECK(x[i] == static_cast<float>(10 * static_cast<int>(i % 13) - 80));
        }
      }
    }
  });
  INFO(failures(results));
  CHECK(failures(results).empty());
}

TEST_CASE("16-bit ring allreduce refuses a message of the wrong size", "[transport]") {
  // Rank 1 sends rank 0 100 bytes where step 0 carries 500 values (1000 bytes): rank 0 throws a
  // ProtocolError naming rank 1 and the tag, its step among them.
  auto results = run_ranks("inproc", 2, [&](RankContext& ctx) {
    Transport& t = ctx.transport();
    const TagLayout layout(t);
    const Tag base = layout.make(purpose::kBenchmark, 1);
    if (ctx.rank() == 0) {
      HalfRingAllreduce allreduce(t, options(), HalfFormat::kBf16, false);
      std::vector<float> x(1000, 1.0f);
      try {
        allreduce.run(x, ReduceOp::kSum, base);
      } catch (const ProtocolError& e) {
        const std::string what = e.what();
        MURMUR_CHECK(what.find("rank 1 sent 100 bytes for a 16-bit ring allreduce receive") !=
                     std::string::npos);
        MURMUR_CHECK(what.find("step 0, chunk 0), expected 1000") != std::string::npos);
        return;
      }
      throw std::runtime_error("no ProtocolError");
    }
    std::vector<std::byte> forged(100);
    send_forged(t, 0, layout.with(base, 0, 0), forged, 2000, options().timeout);
  });
  INFO(failures(results));
  CHECK(failures(results).empty());
}

}  // namespace
}  // namespace murmur::transport::testing
