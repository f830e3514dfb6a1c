// algorithm.wire: the averaging's messages in fp16 or bf16 with fp32 sums. allreduce (of
// parameters and of gradients) and local_sgd average within the format's rounding, bitwise the
// same on every rank, for half the bytes; dpsgd's 16-bit gossip keeps the mean over peers exact
// (it mixes differences of the rounded values) and still reaches consensus; the combinations it
// does not fit are refused, naming the key.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <mutex>

#include "core/error.h"
#include "core/half.h"
#include "membership/live_set.h"
#include "optimizers/algorithm.h"
#include "optimizers/device_arrays.h"
#include "optimizers/wire.h"
#include "tests/optimizers/consensus_util.h"
#include "tests/transport/backends.h"
#include "transport/collectives.h"
#include "transport/tag.h"

namespace murmur::optimizers::testing {
namespace {

namespace tt = transport::testing;

AlgorithmConfig with_wire(const std::string& name, const std::string& format,
                          const std::string& rounding = "nearest") {
  AlgorithmConfig a = algorithm(name);
  a.wire.format = format;
  a.wire.rounding = rounding;
  return a;
}

TransportConfig transport_config() {
  TransportConfig tc;
  tc.recv_timeout_ms = 20000;
  return tc;
}

// Runs `rounds` rounds of `alg` (no gradients) on `ranks` inproc ranks from initial_vector().
// Checks every rank against `check(rank, x, bytes sent)`.
void run_rounds(const AlgorithmConfig& alg, int ranks, std::size_t dim, int rounds,
                const std::function<void(tt::RankContext&, std::vector<float>&, std::uint64_t)>& check) {
  auto results = tt::run_ranks("inproc", ranks, [&](tt::RankContext& ctx) {
    std::vector<float> x = initial_vector(7, ctx.rank(), dim);
    auto built = build_averaging(ctx.transport(), device::cpu(), alg, graph("ring"),
                                 transport_config(), x, 7);
    const std::uint64_t before = ctx.transport().bytes_sent();
    for (int t = 1; t <= rounds; ++t) built.averaging->after_step(t);
    built.averaging->flush();
    check(ctx, x, ctx.transport().bytes_sent() - before);
  });
  INFO(tt::failures(results));
  REQUIRE(tt::failures(results).empty());
}

double initial_mean(int ranks, std::size_t dim, std::size_t i) {
  double m = 0;
  for (int q = 0; q < ranks; ++q) m += initial_vector(7, q, dim)[i];
  return m / ranks;
}

TEST_CASE("allreduce and local_sgd with a 16-bit wire: the mean within its rounding, the same "
          "everywhere, half the bytes", "[wire]") {
  constexpr int kRanks = 4;
  constexpr std::size_t kDim = 5001;
  std::mutex mu;
  std::uint64_t fp32_bytes = 0;
  run_rounds(algorithm("allreduce"), kRanks, kDim, 1,
             [&](tt::RankContext&, std::vector<float>&, std::uint64_t sent) {
               std::lock_guard lock(mu);
               fp32_bytes = sent;
             });
  REQUIRE(fp32_bytes > 0);
  for (const std::string name : {"allreduce", "local_sgd"}) {
    for (const std::string format : {"fp16", "bf16"}) {
      for (const std::string rounding : {"nearest", "stochastic"}) {
        CAPTURE(name, format, rounding);
        const HalfFormat f = format == "bf16" ? HalfFormat::kBf16 : HalfFormat::kFp16;
        const double u = f == HalfFormat::kBf16 ? 0x1p-7 : 0x1p-10;
        run_rounds(with_wire(name, format, rounding), kRanks, kDim, 1,
                   [&](tt::RankContext& ctx, std::vector<float>& x, std::uint64_t sent) {
                     // Inputs of magnitude ~1: kRanks + 1 roundings of at most one unit each.
                     for (std::size_t i = 0; i < kDim; i += 7) {
                       const double want = initial_mean(kRanks, kDim, i);
                       MURMUR_CHECK(std::fabs(x[i] - want) <= (kRanks + 1) * u * 4.0);
                       MURMUR_CHECK(from_half(to_half(x[i], f), f) == x[i]);
                     }
                     MURMUR_CHECK(sent * 2 <= fp32_bytes + 16);
                     tt::check_same_as_neighbors(
                         ctx.transport(), x, tt::every_rank(kRanks),
                         transport::TagLayout(ctx.transport()).make(transport::purpose::kBenchmark, 1));
                   });
      }
    }
  }
}

TEST_CASE("allreduce of gradients with a 16-bit wire", "[wire]") {
  AlgorithmConfig alg = with_wire("allreduce", "fp16");
  alg.average = "gradients";
  auto results = tt::run_ranks("inproc", 3, [&](tt::RankContext& ctx) {
    std::vector<float> params(2000, 0.0f), grads(2000);
    auto built = build_averaging(ctx.transport(), device::cpu(), alg, graph("ring"),
                                 transport_config(), params, 7);
    auto region = register_array(ctx.transport(), device::cpu(), grads);
    built.averaging->attach_gradients(grads, *region);
    for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = static_cast<float>(ctx.rank() + i % 5);
    const std::uint64_t before = ctx.transport().bytes_sent();
    built.averaging->average_gradients(1);
    // Sums of small integers over 3: exact before the mean's one rounding.
    for (std::size_t i = 0; i < grads.size(); ++i) {
      const float want = to_fp16(static_cast<float>(1 + i % 5));
      MURMUR_CHECK(grads[i] == from_fp16(want));
    }
    // 2 of 3 segments sent twice, 2 bytes per value.
    MURMUR_CHECK(ctx.transport().bytes_sent() - before <= 2 * 2 * 2 * 667);
  });
  INFO(tt::failures(results));
  CHECK(tt::failures(results).empty());
}

TEST_CASE("dpsgd with a 16-bit wire keeps the mean exact and reaches consensus", "[wire]") {
  constexpr int kRanks = 6;
  constexpr std::size_t kDim = 1001;  // odd: one padding value per message
  constexpr int kRounds = 40;
  for (const std::string format : {"fp16", "bf16"}) {
    for (const std::string rounding : {"nearest", "stochastic"}) {
      CAPTURE(format, rounding);
      const double u = format == "bf16" ? 0x1p-7 : 0x1p-10;
      run_rounds(with_wire("dpsgd", format, rounding), kRanks, kDim, kRounds,
                 [&](tt::RankContext& ctx, std::vector<float>& x, std::uint64_t sent) {
                   // Two neighbors a round, (kDim + 1) / 2 floats' bytes each: half of fp32's.
                   MURMUR_CHECK(sent == static_cast<std::uint64_t>(kRounds) * 2 * (kDim + 1) * 2);
                   // The mean over peers, summed in fp32 by an exact ring, is the initial mean
                   // to fp32 rounding (mixing q(x_i) itself would drift by the format's rounding).
                   std::vector<float> sum = x;
                   auto region = ctx.transport().register_region(std::as_writable_bytes(std::span(sum)));
                   transport::ring_allreduce(
                       ctx.transport(), *region, sum, transport::ReduceOp::kAverage,
                       transport::TagLayout(ctx.transport()).make(transport::purpose::kBenchmark, 1));
                   double worst_mean = 0, worst_spread = 0;
                   for (std::size_t i = 0; i < kDim; ++i) {
                     worst_mean = std::max(worst_mean, std::fabs(sum[i] - initial_mean(kRanks, kDim, i)));
                     worst_spread = std::max(worst_spread, static_cast<double>(std::fabs(x[i] - sum[i])));
                   }
                   if (worst_mean > 2e-6 || worst_spread > 8 * u) {
                     MURMUR_CHECK(fmt::format("rank {}: mean off by {}, {} from the mean", ctx.rank(),
                                              worst_mean, worst_spread) == "");
                   }
                 });
    }
  }
}

TEST_CASE("a 16-bit wire is refused where it does not fit, naming the key", "[wire]") {
  auto refused = [](const AlgorithmConfig& a, const std::string& says) {
    CAPTURE(a.name, says);
    try {
      check_algorithm(a, graph("ring"), 4, 1);
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      CHECK(what.find("algorithm.wire.format") != std::string::npos);
      CHECK(what.find(says) != std::string::npos);
      return;
    }
    FAIL("not refused");
  };
  refused(with_wire("sgp", "bf16"), "is for allreduce, local_sgd, diloco and dpsgd");
  refused(with_wire("choco", "fp16"), "algorithm.compressor.name");
  AlgorithmConfig a = with_wire("dpsgd", "bf16");
  a.overlap = true;
  refused(a, "algorithm.overlap");
  a = with_wire("dpsgd", "bf16");
  a.max_staleness = 2;
  refused(a, "algorithm.max_staleness");
  a = with_wire("allreduce", "bf16");
  a.hierarchical = true;
  refused(a, "algorithm.hierarchical");
  a = with_wire("allreduce", "bf16");
  a.average = "gradients";
  a.sparsify.name = "dgc";
  refused(a, "algorithm.sparsify");
  CHECK_NOTHROW(check_algorithm(with_wire("diloco", "bf16"), graph("ring"), 4, 1));
  CHECK_NOTHROW(check_algorithm(with_wire("sgp", "fp32"), graph("ring"), 4, 1));
  CHECK_THROWS_WITH(check_wire_device(with_wire("dpsgd", "fp16").wire, false),
                    Catch::Contains("not on a GPU peer"));
  // The exact average's 16-bit ring is the whole world's: not with the survivors' live ring.
  auto results = tt::run_ranks("inproc", 2, [&](tt::RankContext& ctx) {
    membership::LiveSet live(2, ctx.rank(), std::chrono::milliseconds(2000));
    std::vector<float> x(10);
    try {
      build_averaging(ctx.transport(), device::cpu(), with_wire("allreduce", "bf16"),
                      graph("ring"), transport_config(), x, 7, &live);
    } catch (const ConfigError& e) {
      MURMUR_CHECK(std::string(e.what()).find("run.on_peer_failure: stop") != std::string::npos);
      return;
    }
    MURMUR_CHECK(!"not refused");
  });
  INFO(tt::failures(results));
  CHECK(tt::failures(results).empty());
}

}  // namespace
}  // namespace murmur::optimizers::testing
