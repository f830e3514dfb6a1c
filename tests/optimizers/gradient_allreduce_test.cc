// allreduce with algorithm.average = gradients (as DDP) over inproc ranks: the gradients become
// their mean in fused buckets from the arena's end, and with overlap a bucket's allreduce starts
// while "backward" (here: layers written from the last to the first, with a pause each) still
// runs, as Poseidon's wait-free backprop does. The config combinations it refuses.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "optimizers/algorithm.h"
#include "optimizers/allreduce.h"
#include "optimizers/device_arrays.h"
#include "tests/optimizers/consensus_util.h"
#include "tests/transport/backends.h"

namespace murmur::optimizers::testing {
namespace {

namespace tt = transport::testing;

// Rank r's gradient entry i at step t.
float gradient(int r, int t, std::size_t i) {
  return static_cast<float>((r + 1) * 0.25 + t * 0.5 + static_cast<double>(i % 97) * 0.01);
}

struct Run {
  bool overlap = false;
  int ranks = 3;
  int steps = 3;
  std::size_t dim = 300000;  // 1.14 MiB: five buckets of 0.25 MiB
  double bucket_mb = 0.25;
  std::chrono::milliseconds layer_time{30};
};

struct Outcome {
  std::string failures;
  std::int64_t averaged = 0;
  std::int64_t in_backward = 0;
  std::size_t buckets = 0;
};

Outcome run_gradient_allreduce(const Run& run) {
  AlgorithmConfig alg = algorithm("allreduce");
  alg.average = "gradients";
  alg.overlap = run.overlap;
  alg.bucket_mb = run.bucket_mb;
  std::mutex mu;
  Outcome out;
  // "Layers": four slices of the arena, backward writes them last to first.
  const std::size_t d = run.dim;
  const std::size_t cuts[] = {0, d / 10, d / 2, d * 9 / 10, d};
  auto results = tt::run_ranks("inproc", run.ranks, [&](tt::RankContext& ctx) {
    std::vector<float> params(d, 0.0f), grads(d, 0.0f);
    TransportConfig tc;
    tc.recv_timeout_ms = 20000;
    auto built = build_averaging(ctx.transport(), device::cpu(), alg, graph("ring"), tc, params, 7);
    auto region = register_array(ctx.transport(), device::cpu(), grads);
    Averaging& a = *built.averaging;
    MURMUR_CHECK(a.averages_gradients());
    a.attach_gradients(grads, *region);
    const int r = ctx.rank();
    for (int t = 1; t <= run.steps; ++t) {
      for (int layer = 3; layer >= 0; --layer) {
        for (std::size_t i = cuts[layer]; i < cuts[layer + 1]; ++i) grads[i] = gradient(r, t, i);
        a.grads_ready(t, cuts[layer]);
        if (run.overlap) std::this_thread::sleep_for(run.layer_time);
      }
      a.average_gradients(t);
      for (std::size_t i = 0; i < d; ++i) {
        double mean = 0;
        for (int q = 0; q < run.ranks; ++q) mean += gradient(q, t, i);
        mean /= run.ranks;
        if (std::fabs(grads[i] - mean) > 1e-5) {
          MURMUR_CHECK(fmt::format("step {} float {}: {} against the mean {}", t, i, grads[i],
                                   mean) == "");
          break;
        }
      }
    }
    const auto stats = a.take_stats();
    MURMUR_CHECK(stats.comm_s > 0 && stats.wait_s >= 0);
    // The parameters were never touched: only the gradients are averaged.
    MURMUR_CHECK(std::all_of(params.begin(), params.end(), [](float p) { return p == 0.0f; }));
    auto& allreduce = dynamic_cast<AllreduceAveraging&>(a);
    std::lock_guard lock(mu);
    out.averaged = allreduce.buckets_averaged();
    out.in_backward = allreduce.buckets_started_in_backward();
    out.buckets = allreduce.buckets().size();
  });
  out.failures = tt::failures(results);
  return out;
}

}  // namespace

TEST_CASE("allreduce of gradients gives every rank their mean", "[algorithms][gradients]") {
  Run run;
  const Outcome o = run_gradient_allreduce(run);
  INFO(o.failures);
  REQUIRE(o.failures.empty());
  CHECK(o.buckets == 1);  // without overlap: one allreduce after backward
  CHECK(o.averaged == run.steps);
  CHECK(o.in_backward == 0);
}

TEST_CASE("wait-free backprop: bucket allreduces start while backward runs",
          "[algorithms][gradients]") {
  Run run;
  run.overlap = true;
  const Outcome o = run_gradient_allreduce(run);
  INFO(o.failures);
  REQUIRE(o.failures.empty());
  CHECK(o.buckets == 5);  // ceil(300000 / 65536)
  CHECK(o.averaged == 5 * run.steps);
  // The last layer's slice (the top tenth, a bucket and more) is ready 3 x 30 ms before
  // backward ends: its bucket's allreduce has started by then in every step.
  CHECK(o.in_backward >= run.steps);
}

TEST_CASE("the buckets cover the arena from its end", "[algorithms][gradients]") {
  AlgorithmConfig alg = algorithm("allreduce");
  alg.average = "gradients";
  alg.overlap = true;
  alg.bucket_mb = 1.0 / 1024;  // 256 floats
  auto results = tt::run_ranks("inproc", 2, [&](tt::RankContext& ctx) {
    std::vector<float> params(1000), grads(1000);
    TransportConfig tc;
    auto built = build_averaging(ctx.transport(), device::cpu(), alg, graph("ring"), tc, params, 7);
    auto region = register_array(ctx.transport(), device::cpu(), grads);
    built.averaging->attach_gradients(grads, *region);
    const auto& b = dynamic_cast<AllreduceAveraging&>(*built.averaging).buckets();
    MURMUR_CHECK(b.size() == 4);
    MURMUR_CHECK(b[0].lo == 744 && b[0].hi == 1000);
    MURMUR_CHECK(b[2].lo == 232 && b[3].lo == 0 && b[3].hi == 232);
  });
  const std::string failures = tt::failures(results);
  INFO(failures);
  CHECK(failures.empty());
}

TEST_CASE("gradient averaging refuses what it cannot do", "[algorithms][gradients]") {
  AlgorithmConfig a = algorithm("dpsgd");
  a.average = "gradients";
  CHECK_THROWS_WITH(check_algorithm(a, graph("ring"), 4, 7),
                    Catch::Contains("algorithm.average: gradients is allreduce's"));
  a = algorithm("allreduce");
  a.overlap = true;
  CHECK_THROWS_WITH(check_algorithm(a, graph("ring"), 4, 7),
                    Catch::Contains("allreduce overlaps backward with algorithm.average = "
                                    "gradients"));
  a.average = "gradients";
  CHECK(check_algorithm(a, graph("ring"), 4, 7).empty());
  a.local_steps = 4;
  CHECK_THROWS_WITH(check_algorithm(a, graph("ring"), 4, 7),
                    Catch::Contains("averaged every step"));
  a.local_steps = 1;
  a.hierarchical = true;
  a.overlap = false;
  CHECK_THROWS_AS(check_algorithm(a, graph("ring"), 4, 7), ConfigError);
}

}  // namespace murmur::optimizers::testing
