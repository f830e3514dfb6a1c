// The sparse allreduce (SparCML): the exact sum of every rank's pairs, bitwise the same on every
// rank, sparse while the merge is sparse and dense once it fills half the vector, on every
// backend with powers of two and not; and a malformed message refused before it is used.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "core/crc32c.h"
#include "core/error.h"
#include "tests/time_scale.h"
#include "tests/transport/backends.h"
#include "transport/collectives.h"
#include "transport/sparse_allreduce.h"
#include "transport/tag.h"

namespace murmur::transport::testing {
namespace {

// Rank r's pairs: about density * n indices, reproducible on every rank, with varied values.
void pairs_of(int rank, std::size_t n, double density, std::vector<std::uint32_t>& index,
              std::vector<float>& value) {
  index.clear();
  value.clear();
  const auto threshold = static_cast<std::uint64_t>(density * 1000000.0);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ (rank + 1) * 0xC2B2AE3D27D4EB4Full;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    if (h % 1000000 < threshold) {
      index.push_back(static_cast<std::uint32_t>(i));
      value.push_back(static_cast<float>(static_cast<std::int64_t>(h % 2001) - 1000) / 64.0f);
    }
  }
}

CollectiveOptions options() {
  CollectiveOptions o;
  o.timeout = murmur::testing::scaled(std::chrono::seconds(30));
  return o;
}

TEST_CASE("sparse allreduce equals the exact sum, the same on every rank",
          "[transport][multiproc]") {
  // 0.1% (DGC's density: stays sparse), 5% and 40% (the merge of 4 or more fills half the
  // vector: goes dense on the way); powers of two and not (3, 5, 6 fold ranks in).
  auto backend = GENERATE(from_range(built_backends()));
  auto ranks = GENERATE(1, 2, 3, 5, 6, 8);
  CAPTURE(backend, ranks);
  constexpr std::size_t kN = 100003;
  auto results = run_ranks(backend, ranks, [&](RankContext& ctx) {
    Transport& t = ctx.transport();
    const TagLayout layout(t);
    SparseAllreduce allreduce(t, kN, options());
    std::vector<float> out(kN, -7.0f);
    std::vector<std::uint32_t> index;
    std::vector<float> value;
    int round = 0;
    for (double density : {0.001, 0.05, 0.4}) {
      // The exact sum in doubles over every rank's pairs, its sum of magnitudes (for the
      // rounding bound), and the union of their indices: once per density, in flat arrays
      // (a map of 40% of 100003 entries per rank and round was most of this test under TSan).
      std::vector<double> exact_sum(kN, 0.0), exact_magnitude(kN, 0.0);
      std::vector<char> present(kN, 0);
      std::size_t union_size = 0;
      for (int q = 0; q < ctx.size(); ++q) {
        pairs_of(q, kN, density, index, value);
        for (std::size_t j = 0; j < index.size(); ++j) {
          exact_sum[index[j]] += value[j];
          exact_magnitude[index[j]] += std::fabs(value[j]);
          if (!present[index[j]]) ++union_size, present[index[j]] = 1;
        }
      }
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        pairs_of(ctx.rank(), kN, density, index, value);
        const SparseAllreduceStats stats =
            allreduce.run(index, value, out, op, layout.make(purpose::kBenchmark, ++round));
        const double scale = op == ReduceOp::kAverage ? 1.0 / ctx.size() : 1.0;
        for (std::size_t i = 0; i < kN; ++i) {
          const double want = exact_sum[i] * scale;
          const double bound = (ctx.size() + 1) * 6e-8 * exact_magnitude[i] * scale;
          if (std::fabs(out[i] - want) > bound) {
            throw std::runtime_error(
                fmt::format("density {} i={}: got {} want {}", density, i, out[i], want));
          }
        }
        const bool dense = union_size > SparseAllreduce::max_sparse_pairs(kN);
        MURMUR_CHECK(stats.went_dense == dense);
        if (!stats.went_dense) MURMUR_CHECK(stats.result_nonzeros == union_size);
        if (density == 0.001) {
          MURMUR_CHECK(!stats.went_dense);
          // Sparse all the way: a rank sends at most log2(p) + 1 messages of at most the union.
          MURMUR_CHECK(stats.bytes_sent <=
                       5 * SparseAllreduce::sparse_message_bytes(union_size));
        }
        if (density == 0.4 && ctx.size() >= 2) MURMUR_CHECK(stats.went_dense);
        check_same_as_neighbors(t, out, every_rank(ctx.size()),
                                layout.make(purpose::kBenchmark, ++round));
      }
    }
  });
  INFO(failures(results));
  CHECK(failures(results).empty());
}

TEST_CASE("sparse allreduce refuses a malformed message before using it", "[transport]") {
  // Rank 1 sends rank 0 a hand-made message in place of its level-0 exchange; rank 0 must throw
  // ProtocolError naming rank 1 and what is wrong, with its output untouched.
  constexpr std::size_t kN = 1000;
  struct Case {
    const char* name;
    std::uint32_t magic, format, count;
    std::vector<std::uint32_t> index;
    bool good_crc;
    const char* expect;
  };
  const std::vector<Case> cases{
      {"index out of range", 0x5053524dU, 0, 2, {3, 1000}, true, "out of order or >= 1000"},
      {"indices out of order", 0x5053524dU, 0, 2, {7, 7}, true, "out of order"},
      {"bad crc", 0x5053524dU, 0, 2, {1, 2}, false, "CRC32C mismatch"},
      {"bad magic", 0x12345678U, 0, 2, {1, 2}, true, "bad magic"},
      {"count beyond the bytes", 0x5053524dU, 0, 9, {1, 2}, true, "bytes of payload"},
      {"too many pairs", 0x5053524dU, 0, 600, {1, 2}, true, "above the 500"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    auto results = run_ranks("inproc", 2, [&](RankContext& ctx) {
      Transport& t = ctx.transport();
      const TagLayout layout(t);
      const Tag base = layout.make(purpose::kBenchmark, 1);
      if (ctx.rank() == 0) {
        SparseAllreduce allreduce(t, kN, options());
        std::vector<float> out(kN, 5.0f);
        const std::vector<std::uint32_t> index{4};
        const std::vector<float> value{1.0f};
        try {
          allreduce.run(index, value, out, ReduceOp::kSum, base);
        } catch (const ProtocolError& e) {
          const std::string what = e.what();
          MURMUR_CHECK(what.find("rank 1") != std::string::npos);
          MURMUR_CHECK(what.find(c.expect) != std::string::npos);
          MURMUR_CHECK(std::all_of(out.begin(), out.end(), [](float x) { return x == 5.0f; }));
          return;
        }
        throw std::runtime_error("no ProtocolError");
      }
      // Rank 1: the forged message, then drain rank 0's.
      std::vector<std::byte> msg(16 + c.index.size() * 8);
      auto put = [&](std::size_t at, std::uint32_t v) { std::memcpy(msg.data() + at, &v, 4); };
      put(0, c.magic);
      put(4, c.format);
      put(8, c.count);
      for (std::size_t j = 0; j < c.index.size(); ++j) {
        put(16 + 4 * j, c.index[j]);
        const float v = 1.0f;
        std::memcpy(msg.data() + 16 + 4 * c.index.size() + 4 * j, &v, 4);
      }
      std::uint32_t crc = crc32c(std::span<const std::byte>(msg).subspan(16));
      put(12, c.good_crc ? crc : crc ^ 1u);
      send_forged(t, 0, layout.with(base, 1, 0), msg, 16 + kN * 4, options().timeout);
    });
    INFO(failures(results));
    CHECK(failures(results).empty());
  }
}

}  // namespace
}  // namespace murmur::transport::testing
