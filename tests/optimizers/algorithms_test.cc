// The algorithms with local steps in between (inproc threads): every averaging scheme keeps the
// sum of the peers' local updates (so the consensus lands on mean(x0) + mean(updates)); DiLoCo's
// outer Nesterov step, post-local SGD's schedule, resume state, stats and config errors.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <mutex>

#include "core/error.h"
#include "optimizers/algorithm.h"
#include "optimizers/sgp.h"
#include "tests/optimizers/consensus_util.h"
#include "tests/transport/backends.h"
#include "transport/inproc/transport.h"

namespace murmur::optimizers::testing {
namespace {

namespace tt = transport::testing;

// Runs `body(rank, averaging, params)` on n inproc ranks; returns the failures ("" if none).
std::string on_ranks(int n, const AlgorithmConfig& alg, const TopologyConfig& topo, std::size_t dim,
                     const std::function<void(int, Averaging&, std::vector<float>&)>& body,
                     float same_start = NAN) {
  auto results = tt::run_ranks("inproc", n, [&](tt::RankContext& ctx) {
    std::vector<float> params = initial_vector(7, ctx.rank(), dim);
    if (!std::isnan(same_start)) std::fill(params.begin(), params.end(), same_start);
    TransportConfig tc;
    tc.recv_timeout_ms = 20000;
    auto built = build_averaging(ctx.transport(), device::cpu(), alg, topo, tc, params, 7);
    body(ctx.rank(), *built.averaging, params);
  });
  return tt::failures(results);
}

TEST_CASE("gossip keeps the sum of local updates", "[algorithms]") {
  struct Case {
    const char* name;
    const char* graph;
    bool overlap;
    int tau;
  };
  const Case c =
      GENERATE(Case{"dpsgd", "ring", false, 0}, Case{"dpsgd", "ring", true, 0},
               Case{"sgp", "random_kout", false, 0}, Case{"sgp", "random_kout", false, 2},
               Case{"pairwise", "exponential", false, 0}, Case{"choco", "exponential", false, 0});
  CAPTURE(c.name, c.overlap, c.tau);
  const int n = 8, steps = 20, settle = 150;
  const std::size_t dim = 64;
  AlgorithmConfig alg = algorithm(c.name);
  alg.overlap = c.overlap;
  alg.tau = c.tau;
  if (find_algorithm(c.name).compresses) alg.compressor.name = "fp16";
  alg.consensus_lr = 0.5;
  // Rank r adds u_r(i) = (r + 1) * 0.01 * (i % 3) in each of the first `steps` steps.
  std::vector<double> expect(dim, 0.0);
  for (int r = 0; r < n; ++r) {
    auto x = initial_vector(7, r, dim);
    for (std::size_t i = 0; i < dim; ++i)
      expect[i] += (x[i] + steps * (r + 1) * 0.01 * (i % 3)) / n;
  }
  std::mutex mu;
  double worst = 0;
  auto failures = on_ranks(n, alg, graph(c.graph), dim, [&](int r, Averaging& a, auto& params) {
    for (int t = 1; t <= steps + settle; ++t) {
      if (t <= steps) {
        for (std::size_t i = 0; i < dim; ++i) params[i] += (r + 1) * 0.01f * (i % 3);
      }
      a.after_step(t);
    }
    a.flush();
    std::vector<float> z(dim);
    std::span<const float> model = a.debiased(z) ? std::span<const float>(z) : params;
    std::lock_guard lock(mu);
    for (std::size_t i = 0; i < dim; ++i) worst = std::max(worst, std::fabs(model[i] - expect[i]));
  });
  INFO(failures);
  REQUIRE(failures.empty());
  CHECK(worst < 2e-3);
}

TEST_CASE("diloco takes an outer Nesterov step on the averaged pseudo-gradient", "[algorithms]") {
  const int n = 4, H = 3;
  const std::size_t dim = 16;
  AlgorithmConfig alg = algorithm("diloco");
  alg.local_steps = H;
  alg.outer_lr = 0.7;
  alg.outer_momentum = 0.9;
  auto failures = on_ranks(
      n, alg, graph("ring"), dim,
      [&](int r, Averaging& a, auto& params) {
        // Every rank starts from the same global model; rank r's inner steps move it by (r+1)*0.1.
        std::vector<double> theta(dim, 1.0), m(dim, 0.0);
        for (int outer = 0; outer < 3; ++outer) {
          for (int k = 1; k <= H; ++k) {
            for (auto& p : params) p -= (r + 1) * 0.1f / H;
            a.after_step(outer * H + k);
          }
          // Reference: Delta = theta - mean_r(theta - (r+1)*0.1) = 0.25; m = mu m + Delta;
          // theta -= lr (Delta + mu m).
          for (std::size_t i = 0; i < dim; ++i) {
            const double delta = 0.25;
            m[i] = 0.9 * m[i] + delta;
            theta[i] -= 0.7 * (delta + 0.9 * m[i]);
            MURMUR_CHECK(std::fabs(params[i] - theta[i]) < 1e-5);
          }
        }
        auto state = a.state();
        MURMUR_CHECK(state.size() == 2 && state[0].first == "diloco.global");
        MURMUR_CHECK(std::fabs(state[1].second[0] - m[0]) < 1e-5);
      },
      /*same_start=*/1.0f);
  INFO(failures);
  CHECK(failures.empty());
}

TEST_CASE("local_sgd averages only at the steps of its schedule", "[algorithms]") {
  AlgorithmConfig alg = algorithm("local_sgd");
  alg.local_steps = 3;
  alg.switch_step = 2;
  auto failures = on_ranks(4, alg, graph("ring"), 8, [&](int r, Averaging& a, auto& params) {
    for (int t = 1; t <= 9; ++t) {
      params[0] = static_cast<float>(r);  // a fresh disagreement before every call
      a.after_step(t);
      const bool averaged = t < 2 || t % 3 == 0;
      MURMUR_CHECK(params[0] == (averaged ? 1.5f : static_cast<float>(r)));
    }
  });
  INFO(failures);
  CHECK(failures.empty());
}

TEST_CASE("stats split communication and waiting", "[algorithms]") {
  const std::string name = GENERATE("allreduce", "dpsgd", "sgp", "adpsgd", "pairwise", "choco");
  CAPTURE(name);
  AlgorithmConfig alg = algorithm(name);
  alg.overlap = find_algorithm(name).overlaps;
  auto failures = on_ranks(4, alg, graph("ring"), 256, [&](int, Averaging& a, auto&) {
    for (int t = 1; t <= 5; ++t) a.after_step(t);
    a.finish();  // flush(); adpsgd also ends its exchanges
    auto s = a.take_stats();
    MURMUR_CHECK(s.comm_s > 0 && s.wait_s >= 0 && s.wait_s <= s.comm_s * 1.5 + 1e-3);
    auto again = a.take_stats();
    MURMUR_CHECK(again.comm_s == 0 && again.wait_s == 0);
  });
  INFO(failures);
  CHECK(failures.empty());
}

TEST_CASE("sgp saves x and w and resumes from them", "[algorithms]") {
  auto transports = transport::inproc::make_world(1);
  std::vector<float> params(10, 2.0f);
  auto region = transports[0]->register_region(std::as_writable_bytes(std::span(params)));
  TransportConfig tc;
  AlgorithmConfig alg = algorithm("sgp");
  TopologyConfig topo = graph("ring");
  auto hood = membership::strict_neighborhood(*transports[0], {}, transport::host_float_ops());
  AveragingContext ctx{alg, topo, tc, *hood, device::cpu(), params, *region, 1};
  Sgp sgp(ctx);
  auto state = sgp.state();
  REQUIRE(state.size() == 1);
  CHECK(state[0].first == "sgp.x");
  std::fill(state[0].second.begin(), state[0].second.end(), 3.0f);
  sgp.restore_scalars({{"sgp.w", "0.5"}});
  CHECK(sgp.weight() == 0.5);
  CHECK(sgp.scalars().at("sgp.w") == "0.5");
  std::vector<float> z(10);
  CHECK(sgp.debiased(z));
  CHECK(z[0] == 6.0f);
  CHECK_THROWS_AS(sgp.restore_scalars({{"sgp.w", "abc"}}), CheckpointError);
}

TEST_CASE("make_averaging refuses what an algorithm cannot run", "[algorithms]") {
  auto transports = transport::inproc::make_world(4);  // only rank 0 is used: nothing is sent
  std::vector<float> params(10, 0.0f), other(10);
  auto region = transports[0]->register_region(std::as_writable_bytes(std::span(params)));
  auto wrong = transports[0]->register_region(std::as_writable_bytes(std::span(other)));
  TransportConfig tc;
  auto hood = membership::strict_neighborhood(*transports[0], {}, transport::host_float_ops());
  auto build = [&](const std::string& name, const std::string& g, transport::Region& reg) {
    AlgorithmConfig alg = algorithm(name);
    TopologyConfig topo = graph(g, "uniform", 2);
    return make_averaging({alg, topo, tc, *hood, device::cpu(), params, reg, 1});
  };
  CHECK_THROWS_AS(build("gossip", "ring", *region), ConfigError);
  CHECK_THROWS_AS(build("dpsgd", "random_kout", *region), ConfigError);
  CHECK_THROWS_AS(build("choco", "random_matching", *region), ConfigError);
  CHECK_THROWS_AS(build("dpsgd", "ring", *wrong), Error);
  CHECK_NOTHROW(build("none", "ring", *region));
  CHECK_NOTHROW(build("sgp", "random_kout", *region));
}

}  // namespace
}  // namespace murmur::optimizers::testing
