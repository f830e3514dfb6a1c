// Collectives on every backend built, with 2 to 8 ranks (threads for inproc, processes
// otherwise): the ring, halving-doubling and direct allreduces against the exact sum, and the
// ring-neighbor exchange; a short message refused by each; and Allreduce's choice and subsets
// on 100 inproc ranks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>

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

// Throws unless x (after an allreduce over `ranks` of input(q, i)) is the exact sum (or mean)
// within float rounding; a sample of every `stride`-th element.
void check_sum(std::span<const float> x, std::span<const int> ranks, ReduceOp op,
               std::size_t stride) {
  const std::size_t n = x.size();
  for (std::size_t i = 0; i < n; i += stride) {
    double exact = 0, magnitude = 0;
    for (int q : ranks) {
      exact += input(q, i);
      magnitude += std::fabs(input(q, i));
    }
    if (op == ReduceOp::kAverage) {
      exact /= static_cast<double>(ranks.size());
      magnitude /= static_cast<double>(ranks.size());
    }
    // Each of the N-1 float additions (and the scaling) rounds by at most eps * |partial|.
    double bound = (static_cast<double>(ranks.size()) + 1) * 6e-8 * magnitude + 1e-30;
    if (std::fabs(x[i] - exact) > bound) {
      throw std::runtime_error(fmt::format("n={} i={}: got {} want {}", n, i, x[i], exact));
    }
  }
}

CollectiveOptions test_options(std::size_t chunk_bytes) {
  CollectiveOptions options;
  options.timeout = murmur::testing::scaled(std::chrono::seconds(30));
  options.chunk_bytes = chunk_bytes;
  return options;
}

TEST_CASE("ring allreduce equals the exact sum within float rounding", "[transport][multiproc]") {
  auto backend = GENERATE(from_range(built_backends()));
  auto ranks = GENERATE(2, 4, 8);
  CAPTURE(backend, ranks);
  // Under TSan: 300007 floats, still several 64 KiB pieces per step with 8 ranks.
  const std::vector<std::size_t> sizes =
      murmur::testing::data_sizes({0, 1, 5, murmur::testing::data_size(1000003, 300007), 4u << 20},
                                  300007);
  auto results = run_ranks(backend, ranks, [&](RankContext& ctx) {
    Transport& t = ctx.transport();
    RingAllreduce allreduce(t, test_options(64 << 10));
    for (std::size_t n : sizes) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        if (n > (1u << 20) && op == ReduceOp::kAverage) continue;  // one big run is enough
        std::vector<float> x(n);
        for (std::size_t i = 0; i < n; ++i) x[i] = input(ctx.rank(), i);
        auto region = t.register_region(std::as_writable_bytes(std::span(x)));
        allreduce.run(*region, x, op, TagLayout(t).make(purpose::kBenchmark, 7));
        // Every element of the small cases; a sample of the 16 MiB one (8 ranks on 2 cores).
        check_sum(x, every_rank(ctx.size()), op, n > (1u << 20) ? 61 : 1);
      }
    }
  });
  INFO(failures(results));
  CHECK(failures(results).empty());
}

// Runs `allreduce` (halving-doubling or direct) over every rank on 0, 1, 5 and 1000003 floats
// (300007 under TSan), sum and mean, numbering tags from `round`; throws unless each result is
// the exact sum and the same as the neighbors'.
template <class Algorithm>
void sum_of_every_size(RankContext& ctx, Algorithm& allreduce, int& round) {
  Transport& t = ctx.transport();
  const TagLayout layout(t);
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{5},
                        murmur::testing::data_size(1000003, 300007)}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      std::vector<float> x(n);
      for (std::size_t i = 0; i < n; ++i) x[i] = input(ctx.rank(), i);
      auto region = t.register_region(std::as_writable_bytes(std::span(x)));
      allreduce.run(*region, x, op, layout.make(purpose::kBenchmark, ++round));
      check_sum(x, every_rank(ctx.size()), op, n > 100000 ? 7 : 1);
      check_same_as_neighbors(t, x, every_rank(ctx.size()),
                              layout.make(purpose::kBenchmark, ++round));
    }
  }
}

TEST_CASE("halving-doubling allreduce equals the exact sum, the same on every rank",
          "[transport][multiproc]") {
  // Powers of two and not (3 = 2 + 1, 5 = 4 + 1, 6 = 4 + 2: ranks fold in and take the result
  // back), on every backend; pieces of 64 KiB number the chunk field.
  auto backend = GENERATE(from_range(built_backends()));
  auto ranks = GENERATE(2, 3, 5, 6, 8);
  CAPTURE(backend, ranks);
  auto results = run_ranks(backend, ranks, [&](RankContext& ctx) {
    Transport& t = ctx.transport();
    HalvingDoublingAllreduce allreduce(t, test_options(64 << 10));
    int round = 0;
    sum_of_every_size(ctx, allreduce, round);
  });
  INFO(failures(results));
  CHECK(failures(results).empty());
}

TEST_CASE("direct allreduce equals the exact sum, the same on every rank",
          "[transport][multiproc]") {
  // Segments of unequal length (n not a multiple of N, n < N), pieces of 64 KiB numbering the
  // chunk field, on every backend; twice over the same scratch.
  auto backend = GENERATE(from_range(built_backends()));
  auto ranks = GENERATE(2, 3, 4);
  CAPTURE(backend, ranks);
  auto results = run_ranks(backend, ranks, [&](RankContext& ctx) {
    Transport& t = ctx.transport();
    DirectAllreduce allreduce(t, test_options(64 << 10));
    const TagLayout layout(t);
    int round = 0;
    sum_of_every_size(ctx, allreduce, round);
    // Over the first and the last rank only, the others idle (a live subset).
    const std::vector<int> ends{0, ctx.size() - 1};
    if (ctx.size() < 3 || (ctx.rank() != 0 && ctx.rank() != ctx.size() - 1)) return;
    std::vector<float> x(10007);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = input(ctx.rank(), i);
    auto region = t.register_region(std::as_writable_bytes(std::span(x)));
    allreduce.set_ranks(ends);
    allreduce.run(*region, x, ReduceOp::kSum, layout.make(purpose::kBenchmark, ++round));
    check_sum(x, ends, ReduceOp::kSum, 1);
    check_same_as_neighbors(t, x, ends, layout.make(purpose::kBenchmark, ++round));
  });
  INFO(failures(results));
  CHECK(failures(results).empty());
}

TEST_CASE("Allreduce takes halving-doubling for large worlds, direct for small data on 3 and 4",
          "[transport]") {
  // Threads: 100 ranks (64 + 36), then 37 of them (32 + 5), the others idle, as the live
  // allreduce leaves the dead out. The auto choice: direct for 3 and 4 ranks whose segments
  // are one piece, else the ring up to kRingMaxRanks.
  constexpr int kWorld = 100;
  std::vector<int> subset;
  for (int r = 0; r < kWorld; r += 3) subset.push_back(r);  // 34 of them, 0 to 99
  subset.insert(subset.end(), {4, 8, 50});
  std::sort(subset.begin(), subset.end());
  REQUIRE(subset.size() == 37);
  auto results = run_ranks("inproc", kWorld, [&](RankContext& ctx) {
    Transport& t = ctx.transport();
    Allreduce allreduce(t, test_options(4 << 10));  // several pieces per step
    // 4 KiB pieces: 4 ranks' segments of 1024 floats are one piece, of 1025 two.
    MURMUR_CHECK(allreduce.algorithm_for(kRingMaxRanks, 1) == AllreduceAlgorithm::kRing);
    MURMUR_CHECK(allreduce.algorithm_for(kRingMaxRanks + 1, 1) ==
                 AllreduceAlgorithm::kHalvingDoubling);
    MURMUR_CHECK(allreduce.algorithm_for(2, 1) == AllreduceAlgorithm::kRing);
    MURMUR_CHECK(allreduce.algorithm_for(3, 1) == AllreduceAlgorithm::kDirect);
    MURMUR_CHECK(allreduce.algorithm_for(4, 4 * 1024) == AllreduceAlgorithm::kDirect);
    MURMUR_CHECK(allreduce.algorithm_for(4, 4 * 1025) == AllreduceAlgorithm::kRing);
    MURMUR_CHECK(allreduce.algorithm_for(5, 1) == AllreduceAlgorithm::kRing);
    const TagLayout layout(t);
    std::vector<float> x(10007);
    auto region = t.register_region(std::as_writable_bytes(std::span(x)));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = input(ctx.rank(), i);
    allreduce.run(*region, x, ReduceOp::kAverage, layout.make(purpose::kBenchmark, 1));
    check_sum(x, every_rank(kWorld), ReduceOp::kAverage, 1);
    check_same_as_neighbors(t, x, every_rank(kWorld), layout.make(purpose::kBenchmark, 2));
    if (std::find(subset.begin(), subset.end(), ctx.rank()) == subset.end()) return;
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = input(ctx.rank(), i);
    allreduce.set_ranks(subset);
    allreduce.run(*region, x, ReduceOp::kSum, layout.make(purpose::kBenchmark, 3));
    check_sum(x, subset, ReduceOp::kSum, 1);
    check_same_as_neighbors(t, x, subset, layout.make(purpose::kBenchmark, 4));
  });
  INFO(failures(results));
  CHECK(failures(results).empty());
}

// Rank 1 sends rank 0 a 100-byte piece under `base` with `step` set, where rank 0, running
// `collective` with `options` (it sends rank 1 2000 bytes under that tag), posted 2000: rank 0
// must throw a ProtocolError naming rank 1 at once, instead of taking the rest of the piece
// from stale memory (a rank with another view of the live ranks sends such pieces under the
// same tag).
void refuses_short_piece(const std::string& backend, std::uint64_t step,
                         const std::function<void(Transport&, Tag, CollectiveOptions)>& collective) {
  CollectiveOptions options = test_options(1 << 20);
  options.timeout = murmur::testing::scaled(std::chrono::seconds(5));
  auto results = run_ranks(backend, 2, [&](RankContext& ctx) {
    Transport& t = ctx.transport();
    const TagLayout layout(t);
    const Tag base = layout.make(purpose::kBenchmark, 1), done = layout.make(purpose::kBenchmark, 2);
    std::vector<std::byte> word(1);
    auto word_region = t.register_region(word);
    if (ctx.rank() == 0) {
      std::string what = "no ProtocolError";
      try {
        collective(t, base, options);
      } catch (const ProtocolError& e) {
        what = e.what();
      }
      // Rank 1 waits for this word, not for the send that rank 0 may have withdrawn unwinding.
      Request r = t.send(1, done, *word_region, {0, 1});
      wait_or_lost(t, r, options.timeout, "the word that rank 0 is done");
      MURMUR_CHECK(what.find("rank 1 sent 100 bytes for a") != std::string::npos);
      MURMUR_CHECK(what.find("expected 2000") != std::string::npos);
      return;
    }
    std::vector<std::byte> forged(100), reply(2000);
    auto out = t.register_region(forged);
    auto in = t.register_region(reply);
    Request theirs = t.recv(0, layout.with(base, step, 0), *in, {0, reply.size()});
    Request sent = t.send(0, layout.with(base, step, 0), *out, {0, forged.size()});
    Request finished = t.recv(0, done, *word_region, {0, 1});
    wait_or_lost(t, sent, options.timeout, "the short piece");
    wait_or_lost(t, finished, options.timeout, "rank 0's word");
    cancel_quietly(t, theirs);
  });
  INFO(failures(results));
  CHECK(failures(results).empty());
}

TEST_CASE("every allreduce refuses a piece shorter than it posted for", "[transport][multiproc]") {
  // 1000 floats over 2 ranks: each piece is half the data, 2000 bytes. Halving-doubling
  // exchanges at its step 1 (step 0 folds in ranks beyond a power of two).
  auto backend = GENERATE(from_range(built_backends()));
  auto algorithm = GENERATE(AllreduceAlgorithm::kRing, AllreduceAlgorithm::kHalvingDoubling,
                            AllreduceAlgorithm::kDirect);
  CAPTURE(backend, static_cast<int>(algorithm));
  refuses_short_piece(backend, algorithm == AllreduceAlgorithm::kHalvingDoubling ? 1 : 0,
                      [&](Transport& t, Tag base, CollectiveOptions options) {
                        options.allreduce = algorithm;
                        std::vector<float> x(1000, 1.0f);
                        auto region = t.register_region(std::as_writable_bytes(std::span(x)));
                        Allreduce(t, options).run(*region, x, ReduceOp::kSum, base);
                      });
}

TEST_CASE("the neighbor exchange refuses a message shorter than its range", "[transport][multiproc]") {
  // A peer whose buffer is shorter (api's neighbor_average) is an error, not zeros mixed in.
  auto backend = GENERATE(from_range(built_backends()));
  CAPTURE(backend);
  refuses_short_piece(backend, 0, [&](Transport& t, Tag base, CollectiveOptions options) {
    std::vector<std::byte> out(2000), in(2000);
    auto from = t.register_region(out);
    auto into = t.register_region(in);
    const std::array<int, 1> peer{1};
    const std::array<ByteRange, 1> range{ByteRange{0, in.size()}};
    neighbor_exchange(t, base, *from, {0, out.size()}, peer, *into, range, peer, options);
  });
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
      neighbor_exchange(t, 100 + round, *out, {0, bytes}, peers, *in, ranges, peers);
      for (std::size_t p = 0; p < peers.size(); ++p) {
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
