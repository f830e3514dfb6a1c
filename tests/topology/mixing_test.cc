// Mixing weights: every built-in graph and scheme is as stochastic as mixing.h promises, broken
// custom matrices are rejected naming the row or column, and the per-rank view is a faithful
// slice of W on which sender and receiver agree.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "core/config.h"
#include "core/error.h"
#include "topology/mixing.h"
#include "topology/schedule.h"

using namespace murmur;
using namespace murmur::topology;

namespace {

TopologyConfig named(const std::string& graph, const std::string& weights = "uniform") {
  TopologyConfig c;
  c.graph = graph;
  c.weights = weights;
  return c;
}

// A matrix from a flat static array. Nested braced lists of doubles are avoided on purpose:
// g++ 12.2 at -O2 -march=native (AVX-512) miscompiles them (its SLP vectorizer turned
// {{0.5, 0.5, 0, 0}, ...} into {{0.5, 0.5, 0.5, 0.5}, ...}); a static array is read from .rodata.
template <std::size_t N>
std::vector<std::vector<double>> square(const double (&flat)[N], int n) {
  std::vector<std::vector<double>> m(n);
  for (int i = 0; i < n; ++i) m[i].assign(flat + i * n, flat + (i + 1) * n);
  return m;
}

bool is_ok(const MixingMatrix& w, Stochastic need) {
  try {
    check_stochastic(w, need, "test");
    return true;
  } catch (const ConfigError&) {
    return false;
  }
}

}  // namespace

TEST_CASE("built-in graphs give doubly stochastic weights", "[topology]") {
  struct Case {
    const char* graph;
    const char* weights;
    int n;
  };
  const Case cases[] = {
      {"ring", "uniform", 7},        {"ring", "metropolis", 7},     {"ring", "uniform", 2},
      {"ring_directed", "uniform", 5}, {"torus", "uniform", 12},    {"torus", "metropolis", 16},
      {"complete", "uniform", 6},    {"hypercube", "uniform", 8},   {"hypercube", "metropolis", 16},
      {"exponential", "uniform", 12}, {"exponential", "uniform", 16},
      {"one_peer_exponential", "uniform", 12}, {"random_matching", "uniform", 9},
      {"random_matching", "metropolis", 10}};
  for (const Case& c : cases) {
    for (std::int64_t round : {0, 1, 5}) {
      INFO(c.graph << " / " << c.weights << " n=" << c.n << " round " << round);
      const MixingMatrix w = mixing_at(named(c.graph, c.weights), c.n, 42, round);
      REQUIRE_NOTHROW(check_doubly_stochastic(w, "test"));
      for (double v : w.w) REQUIRE(v >= 0.0);
    }
  }
}

TEST_CASE("random k-out weights are column-stochastic (push-sum)", "[topology]") {
  TopologyConfig c = named("random_kout");
  c.k = 2;
  for (std::int64_t round = 0; round < 20; ++round) {
    const MixingMatrix w = mixing_at(c, 9, 7, round);
    REQUIRE(is_ok(w, Stochastic::kColumn));
    for (int j = 0; j < 9; ++j) REQUIRE(w(j, j) == Approx(1.0 / 3));
  }
  // With in-degrees varying, some round is not row-stochastic: that is why push-sum exists.
  bool some_row_broken = false;
  for (std::int64_t round = 0; round < 20; ++round) {
    some_row_broken = some_row_broken || !is_ok(mixing_at(c, 9, 7, round), Stochastic::kRow);
  }
  REQUIRE(some_row_broken);
}

TEST_CASE("uniform weights on an irregular graph are only row-stochastic, metropolis is doubly",
          "[topology]") {
  TopologyConfig c = named("custom");
  c.edges = {{0, 1}, {0, 2}, {0, 3}};  // a star
  const MixingMatrix uniform = mixing_matrix(static_graph(c, 4), c);
  REQUIRE(is_ok(uniform, Stochastic::kRow));
  REQUIRE_THROWS_WITH(check_doubly_stochastic(uniform, "star"),
                      Catch::Contains("star: column 0 sums to 1.75") &&
                          Catch::Contains("off by 0.75"));
  c.weights = "metropolis";
  const MixingMatrix metro = mixing_matrix(static_graph(c, 4), c);
  REQUIRE(is_ok(metro, Stochastic::kDoubly));
  REQUIRE(metro(1, 0) == Approx(0.25));
  REQUIRE(metro(1, 1) == Approx(0.75));
  REQUIRE(metro(0, 0) == Approx(0.25));
}

TEST_CASE("a custom matrix that breaks stochasticity names the row and the amount", "[topology]") {
  TopologyConfig c = named("custom", "custom");
  static constexpr double kBroken[] = {0.5, 0.5,  0.0,  0.0,  //
                                       0.5, 0.25, 0.25, 0.0,  //
                                       0.0, 0.25, 0.25, 0.5,  //
                                       0.0, 0.0,  0.3,  0.5};  // row 3 sums to 0.8
  c.matrix = square(kBroken, 4);
  const MixingMatrix w = mixing_at(c, 4, 0, 0);
  REQUIRE(w(3, 2) == 0.3);
  REQUIRE_THROWS_WITH(check_row_stochastic(w),
                      Catch::Equals("topology.matrix: row 3 sums to 0.8 (must be 1, off by 0.2)"));
  REQUIRE_THROWS_WITH(check_column_stochastic(w), Catch::Contains("column 2 sums to 0.8"));
  c.matrix[3][2] = 0.5;
  REQUIRE_NOTHROW(check_doubly_stochastic(mixing_at(c, 4, 0, 0)));

  TopologyConfig on_ring = named("ring", "custom");  // 0 and 2 are not neighbors on a 4-ring
  static constexpr double kSkips[] = {0.5, 0.0, 0.5, 0.0, 0.0, 1.0, 0.0, 0.0,
                                      0.5, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 1.0};
  on_ring.matrix = square(kSkips, 4);
  REQUIRE_THROWS_WITH(mixing_at(on_ring, 4, 0, 0), Catch::Contains("topology.matrix[0][2]"));
  on_ring.matrix[0][0] = NAN;
  REQUIRE_THROWS_AS(mixing_at(on_ring, 4, 0, 0), ConfigError);
  REQUIRE_THROWS_WITH(validate_world(named("ring", "custom"), 4), Catch::Contains("matrix"));
}

TEST_CASE("rank_mixing is a slice of W that senders and receivers agree on", "[topology]") {
  TopologyConfig kout = named("random_kout");
  kout.k = 3;
  const TopologyConfig configs[] = {named("torus", "metropolis"), named("exponential"), kout,
                                    named("random_matching")};
  const int n = 10 - 1;  // 9: a torus of 3 x 3, an odd matching
  for (const TopologyConfig& c : configs) {
    for (std::int64_t round : {0, 3}) {
      INFO(c.graph << " round " << round);
      const MixingMatrix w = mixing_at(c, n, 11, round);
      std::vector<RankMixing> views;
      for (int r = 0; r < n; ++r) views.push_back(rank_mixing(c, n, r, 11, round));
      for (int r = 0; r < n; ++r) {
        const RankMixing& v = views[r];
        REQUIRE(v.self_weight == w(r, r));
        double row = v.self_weight, column = v.self_weight;
        for (std::size_t k = 0; k < v.recv_from.size(); ++k) {
          REQUIRE(v.recv_weights[k] == w(r, v.recv_from[k]));
          row += v.recv_weights[k];
          const auto& peer = views[v.recv_from[k]].send_to;
          REQUIRE(std::find(peer.begin(), peer.end(), r) != peer.end());
        }
        for (std::size_t k = 0; k < v.send_to.size(); ++k) {
          REQUIRE(v.send_weights[k] == w(v.send_to[k], r));
          column += v.send_weights[k];
        }
        double row_sum = 0, column_sum = 0;
        for (int j = 0; j < n; ++j) {
          row_sum += w(r, j);
          column_sum += w(j, r);
        }
        REQUIRE(row == Approx(row_sum));
        REQUIRE(column == Approx(column_sum));
      }
    }
  }
  REQUIRE_THROWS_AS(rank_mixing(named("ring"), 4, 4, 0, 0), ConfigError);
}
