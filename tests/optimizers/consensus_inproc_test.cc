// Consensus without gradients over the inproc transport (8, 16 and 64 ranks as threads): every
// algorithm drives random initial vectors to their mean at the rate the mixing matrices predict.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>

#include "core/error.h"
#include "optimizers/choco.h"
#include "optimizers/compressor.h"
#include "tests/optimizers/consensus_util.h"
#include "topology/graph.h"
#include "topology/mixing.h"
#include "topology/schedule.h"

namespace murmur::optimizers::testing {
namespace {

std::vector<std::string> static_graphs(int n) {
  std::vector<std::string> g{"ring", "ring_directed", "hypercube", "exponential", "complete"};
  if (n >= 16) g.push_back("torus");
  return g;
}

// Rounds until lambda^t reaches 1e-4 (well above float rounding), between 5 and 150.
int rounds_for(double lambda) {
  if (lambda <= 1e-12) return 1;
  return std::clamp(static_cast<int>(std::ceil(std::log(1e-4) / std::log(lambda))), 5, 150);
}

// ||x(t) - mean|| <= lambda^t ||x(0) - mean|| for a normal doubly stochastic W (every built-in
// static graph: symmetric or circulant). Checks that bound within 10% at every round, and that
// it is tight: over the second half, the decay is no faster than (0.9 lambda) per round, since
// random vectors excite the slowest mode.
void check_theory(const ConsensusResult& r, double lambda, int rounds) {
  INFO(r.failures);
  REQUIRE(r.failures.empty());
  const double e0 = r.error[0];
  for (int t = 1; t <= rounds; ++t) {
    const double bound = std::max(std::pow(lambda, t), 2e-6);  // floor: float rounding
    INFO(fmt::format("round {}: error ratio {:.6g}, theory {:.6g}", t, r.error[t] / e0, bound));
    REQUIRE(r.error[t] / e0 <= 1.1 * bound);
  }
  if (lambda > 1e-12 && rounds >= 4) {
    const int h = rounds / 2;
    const double rate = std::pow(r.error[rounds] / r.error[h], 1.0 / (rounds - h));
    INFO(fmt::format("measured rate {:.6g}, second eigenvalue {:.6g}", rate, lambda));
    CHECK(rate >= 0.9 * lambda);
    CHECK(rate <= 1.1 * lambda);
  }
}

TEST_CASE("dpsgd and sgp match the spectral rate on every static graph", "[consensus]") {
  const int n = GENERATE(8, 16, 64);
  for (const std::string name : {"dpsgd", "sgp"}) {
    for (const auto& g : static_graphs(n)) {
      if (n == 64 && name == "sgp" && g == "complete") continue;  // same arithmetic as dpsgd
      CAPTURE(n, name, g);
      ConsensusRun run;
      run.ranks = n;
      run.topology = graph(g);
      run.algorithm = algorithm(name);
      const double lambda = slem(run.topology, n, run.seed);
      run.rounds = rounds_for(lambda);
      auto r = run_consensus(run);
      check_theory(r, lambda, run.rounds);
      CHECK(r.flushed <= r.error[run.rounds] * 1.0001 + 1e-9);
    }
  }
}

TEST_CASE("metropolis weights on a torus match their spectral rate", "[consensus]") {
  ConsensusRun run;
  run.ranks = 16;
  run.topology = graph("torus", "metropolis");
  run.algorithm = algorithm("dpsgd");
  const double lambda = slem(run.topology, 16, run.seed);
  run.rounds = rounds_for(lambda);
  check_theory(run_consensus(run), lambda, run.rounds);
}

TEST_CASE("overlapped dpsgd lands the same rounds one call later", "[consensus]") {
  const int n = GENERATE(8, 16);
  ConsensusRun run;
  run.ranks = n;
  run.topology = graph("ring");
  run.algorithm = algorithm("dpsgd");
  run.algorithm.overlap = true;
  const double lambda = slem(run.topology, n, run.seed);
  run.rounds = 40;
  auto r = run_consensus(run);
  INFO(r.failures);
  REQUIRE(r.failures.empty());
  // After call t, rounds 1..t-1 have landed; after flush, all of them.
  for (int t = 1; t <= run.rounds; ++t) {
    CHECK(r.error[t] / r.error[0] <= 1.1 * std::pow(lambda, t - 1));
  }
  CHECK(r.flushed / r.error[0] <= 1.1 * std::pow(lambda, run.rounds));
  CHECK(r.flushed / r.error[0] >= 0.5 * std::pow(0.9 * lambda, run.rounds));
}

TEST_CASE("one-peer exponential graph reaches the exact mean after log2(n) rounds", "[consensus]") {
  const int n = GENERATE(8, 16, 64);
  for (const std::string name : {"dpsgd", "sgp"}) {
    CAPTURE(n, name);
    ConsensusRun run;
    run.ranks = n;
    run.topology = graph("one_peer_exponential");
    run.algorithm = algorithm(name);
    run.rounds = static_cast<int>(std::log2(n));
    auto r = run_consensus(run);
    INFO(r.failures);
    REQUIRE(r.failures.empty());
    for (int t = 1; t < run.rounds; ++t) CHECK(r.error[t] / r.error[0] > 1e-2);
    CHECK(r.error[run.rounds] / r.error[0] < 1e-6);  // float rounding only
    CHECK(r.spread < 1e-5);
  }
}

// Plain averaging x <- W x with the rows of each round's graph normalized (what D-PSGD would do
// on a directed graph), in double: returns the distance of the consensus value to the mean.
double plain_averaging_bias(const TopologyConfig& topology, int n, std::uint64_t seed, int rounds,
                            std::size_t dim, double* spread) {
  std::vector<std::vector<double>> x(n);
  std::vector<double> mean(dim, 0.0);
  for (int r = 0; r < n; ++r) {
    auto v = initial_vector(seed, r, dim);
    x[r].assign(v.begin(), v.end());
    for (std::size_t i = 0; i < dim; ++i) mean[i] += v[i] / n;
  }
  for (int t = 0; t < rounds; ++t) {
    const auto in = topology::in_neighbors(topology::graph_at(topology, n, seed, t));
    auto next = x;
    for (int r = 0; r < n; ++r) {
      for (int j : in[r]) {
        for (std::size_t i = 0; i < dim; ++i) next[r][i] += x[j][i];
      }
      for (auto& v : next[r]) v /= static_cast<double>(in[r].size() + 1);
    }
    x = std::move(next);
  }
  double bias = 0, s = 0;
  for (int r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < dim; ++i) {
      bias += (x[r][i] - mean[i]) * (x[r][i] - mean[i]);
      s = std::max(s, std::fabs(x[r][i] - x[0][i]));
    }
  }
  *spread = s;
  return std::sqrt(bias);
}

TEST_CASE(
    "push-sum reaches the true mean on a directed time-varying graph; plain averaging "
    "does not",
    "[consensus]") {
  const int n = GENERATE(8, 16, 64);
  const int tau = GENERATE(0, 2);
  CAPTURE(n, tau);
  ConsensusRun run;
  run.ranks = n;
  run.topology = graph("random_kout", "uniform", 1);
  run.algorithm = algorithm("sgp");
  run.algorithm.tau = tau;
  run.rounds = 120;
  run.dim = 200;
  auto r = run_consensus(run);
  INFO(r.failures);
  REQUIRE(r.failures.empty());
  INFO(fmt::format("push-sum error ratio after {} rounds: {:.3g}", run.rounds,
                   r.flushed / r.error[0]));
  CHECK(r.flushed / r.error[0] < 1e-4);
  double spread = 0;
  const double bias = plain_averaging_bias(run.topology, n, run.seed, run.rounds, run.dim, &spread);
  INFO(fmt::format("plain averaging: spread {:.3g}, distance to the mean {:.3g} (of {:.3g})",
                   spread, bias / r.error[0], r.error[0]));
  CHECK(spread < 1e-3);             // it does reach a consensus...
  CHECK(bias / r.error[0] > 1e-2);  // ...at the wrong value
}

TEST_CASE("dpsgd refuses weights that are not doubly stochastic", "[consensus]") {
  ConsensusRun run;
  run.ranks = 8;
  run.topology = graph("random_kout", "uniform", 2);
  run.algorithm = algorithm("dpsgd");
  auto r = run_consensus(run);
  CHECK_THAT(r.failures, Catch::Contains("doubly stochastic"));
}

TEST_CASE("allreduce, local_sgd and diloco average exactly", "[consensus]") {
  const int n = GENERATE(8, 16);
  for (const std::string name : {"allreduce", "local_sgd", "diloco"}) {
    CAPTURE(n, name);
    ConsensusRun run;
    run.ranks = n;
    run.algorithm = algorithm(name);
    run.algorithm.local_steps = name == "allreduce" ? 1 : 4;
    run.algorithm.outer_lr = 1.0;  // diloco: theta <- theta - (theta - mean) = mean
    run.algorithm.outer_momentum = 0.0;
    run.rounds = 4;
    auto r = run_consensus(run);
    INFO(r.failures);
    REQUIRE(r.failures.empty());
    const int first = name == "allreduce" ? 1 : 4;
    for (int t = 1; t < first; ++t) CHECK(r.error[t] == r.error[0]);  // nothing yet
    CHECK(r.error[first] / r.error[0] < 1e-6);
    // The ring gives every rank the bitwise same mean; diloco then steps its own global model.
    if (name == "diloco")
      CHECK(r.spread < 1e-5);
    else
      CHECK(r.spread == 0.0);
  }
}

TEST_CASE("post-local SGD averages every step before switch_step, then every H", "[consensus]") {
  ConsensusRun run;
  run.ranks = 8;
  run.algorithm = algorithm("local_sgd");
  run.algorithm.local_steps = 4;
  run.algorithm.switch_step = 2;
  run.rounds = 3;
  auto r = run_consensus(run);
  INFO(r.failures);
  REQUIRE(r.failures.empty());
  CHECK(r.error[1] / r.error[0] < 1e-6);
}

TEST_CASE("pairwise gossip in rounds converges and keeps the mean", "[consensus]") {
  const int n = GENERATE(8, 16, 64);
  CAPTURE(n);
  ConsensusRun run;
  run.ranks = n;
  run.topology = graph("exponential");
  run.algorithm = algorithm("pairwise");
  run.rounds = 80;
  auto r = run_consensus(run);
  INFO(r.failures);
  REQUIRE(r.failures.empty());
  // Each round halves the difference within each pair; with the mean kept exactly, the error
  // falls towards 0 (and not to a wrong consensus).
  CHECK(r.error[run.rounds] < r.error[0]);
  INFO(fmt::format("error ratio after flush: {:.3g}", r.flushed / r.error[0]));
  CHECK(r.flushed / r.error[0] < 1e-3);
}

}  // namespace
}  // namespace murmur::optimizers::testing

namespace murmur::optimizers::testing {
namespace {

TEST_CASE("choco without compression and gamma 1 is plain gossip", "[consensus][choco]") {
  const int n = GENERATE(8, 16);
  ConsensusRun run;
  run.ranks = n;
  run.topology = graph("ring");
  run.algorithm = algorithm("choco");
  run.algorithm.compressor.name = "none";
  const double lambda = slem(run.topology, n, run.seed);
  run.rounds = rounds_for(lambda);
  check_theory(run_consensus(run), lambda, run.rounds);
}

TEST_CASE("choco with top-1% still reaches consensus", "[consensus][choco]") {
  const int n = GENERATE(8, 16);
  CAPTURE(n);
  ConsensusRun run;
  run.ranks = n;
  run.topology = graph(n == 8 ? "ring" : "torus");
  run.algorithm = algorithm("choco");
  run.algorithm.compressor.name = "topk";
  run.algorithm.compressor.ratio = 0.01;  // 10 of 1000 entries per message
  run.algorithm.consensus_lr = 0.02;
  run.rounds = 2000;
  auto r = run_consensus(run);
  INFO(r.failures);
  REQUIRE(r.failures.empty());
  INFO(fmt::format("error ratio after 500 / 1000 / 2000 rounds: {:.3g} / {:.3g} / {:.3g}",
                   r.error[500] / r.error[0], r.error[1000] / r.error[0],
                   r.error[2000] / r.error[0]));
  CHECK(r.error[500] < r.error[0]);
  CHECK(r.error[2000] / r.error[0] < 1e-3);
}

TEST_CASE("choco reaches consensus with every compressor", "[consensus][choco]") {
  struct Case {
    const char* name;
    double gamma;
    int rounds;
  };
  const Case c = GENERATE(Case{"randomk", 0.02, 2000}, Case{"qsgd", 0.3, 400},
                          Case{"sign", 0.05, 2000}, Case{"fp16", 1.0, 100}, Case{"bf16", 1.0, 100});
  CAPTURE(c.name);
  ConsensusRun run;
  run.ranks = 8;
  run.topology = graph("ring");
  run.algorithm = algorithm("choco");
  run.algorithm.compressor.name = c.name;
  run.algorithm.compressor.ratio = 0.05;
  run.algorithm.consensus_lr = c.gamma;
  run.rounds = c.rounds;
  auto r = run_consensus(run);
  INFO(r.failures);
  REQUIRE(r.failures.empty());
  INFO(
      fmt::format("error ratio after {} rounds: {:.3g}", c.rounds, r.error[c.rounds] / r.error[0]));
  CHECK(r.error[c.rounds] / r.error[0] < 1e-3);
}

TEST_CASE("choco's provable consensus step, by hand on a ring of 4", "[consensus][choco]") {
  // Uniform weights 1/3: eigenvalues 1, 1/3, 1/3, -1/3, so rho = 2/3 and beta = 4/3. With
  // delta = 1: gamma* = (4/9) / (32/3 + 4/9 + 64/9 + 64/27 - 16/3) = 12 / 412.
  const auto w = topology::mixing_at(graph("ring"), 4, 7, 0);
  const ChocoBound b = choco_gamma_bound(1.0, w);
  CHECK(b.spectral_gap == Approx(2.0 / 3));
  CHECK(b.beta == Approx(4.0 / 3));
  CHECK(b.gamma == Approx(12.0 / 412));
  // qsgd's delta for the MLP: 1 / (1 + sqrt(512) / 16) per bucket of 512, 1 / (1 + sqrt(d) / 16)
  // with one norm.
  CompressorConfig q;
  q.name = "qsgd";
  CHECK(make_compressor(q)->delta(535818) == Approx(1 / (1 + std::sqrt(512.0) / 16)));
  q.bucket = 0;
  const double whole = 1 / (1 + std::sqrt(535818.0) / 16);
  CHECK(make_compressor(q)->delta(535818) == Approx(whole));
  const double rho = 2.0 / 3, beta2 = 16.0 / 9;
  CHECK(choco_gamma_bound(whole, w).gamma ==
        Approx(rho * rho * whole / (16 * rho + rho * rho + 4 * beta2 + 2 * rho * beta2 -
                                    8 * rho * whole)));
}

// The MLP's size, where experiments/results/compression's choco + qsgd ran to NaN at gamma 0.2:
// quantizing all 535818 floats against one norm has variance omega = sqrt(d) / s = 45.7 at
// s = 16, and CHOCO's gossip with gamma 0.2 diverges on it (checked below, so this test can
// fail); per bucket of 512, omega = 1.41 and the same gamma converges. At Koloskova et al.'s
// provable step (choco_gamma_bound) it converges too, slowly.
TEST_CASE("choco with qsgd at the MLP's size: buckets converge at gamma 0.2, one norm diverges",
          "[consensus][choco]") {
  struct Case {
    int bucket;
    double gamma;
    int rounds;
  };
  const Case c = GENERATE(Case{512, 0.2, 40}, Case{0, 0.2, 40}, Case{512, 0.01, 40});
  CAPTURE(c.bucket, c.gamma);
  ConsensusRun run;
  run.ranks = 4;
  run.dim = 535818;
  run.topology = graph("ring");
  run.algorithm = algorithm("choco");
  run.algorithm.compressor.name = "qsgd";
  run.algorithm.compressor.levels = 16;
  run.algorithm.compressor.bucket = c.bucket;
  run.algorithm.consensus_lr = c.gamma;
  run.rounds = c.rounds;
  auto r = run_consensus(run);
  INFO(r.failures);
  REQUIRE(r.failures.empty());
  const double end = r.error[c.rounds] / r.error[0];
  INFO(fmt::format("error ratio after 10 / 20 / {} rounds: {:.3g} / {:.3g} / {:.3g}", c.rounds,
                   r.error[10] / r.error[0], r.error[20] / r.error[0], end));
  if (c.bucket == 0) {
    CHECK(!(end < 1));  // NaN or grown
  } else if (c.gamma == 0.2) {
    CHECK(end < 1e-2);
  } else {
    for (int t = 10; t <= c.rounds; t += 10) CHECK(r.error[t] < r.error[t - 10]);
  }
}

TEST_CASE("choco refuses time-varying graphs", "[consensus][choco]") {
  ConsensusRun run;
  run.ranks = 8;
  run.topology = graph("one_peer_exponential");
  run.algorithm = algorithm("choco");
  CHECK_THAT(run_consensus(run).failures, Catch::Contains("static graph"));
}

}  // namespace
}  // namespace murmur::optimizers::testing
