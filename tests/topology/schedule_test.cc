// Time-varying schedules: the graph of a round depends on (seed, round) only, so every rank
// derives the same one alone; random matchings are matchings, k-out graphs have out-degree k,
// one-peer exponential rounds multiply to exact averaging when n is a power of 2, and gossipgrad
// pairs along a relabelled hypercube.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>
#include <string>

#include "core/config.h"
#include "core/error.h"
#include "topology/schedule.h"
#include "topology/spectral.h"

using namespace murmur;
using namespace murmur::topology;

namespace {

TopologyConfig named(const std::string& graph, int k = 1) {
  TopologyConfig c;
  c.graph = graph;
  c.k = k;
  return c;
}

}  // namespace

TEST_CASE("every rank derives the same schedule from the same seed", "[topology]") {
  for (const TopologyConfig& c : {named("random_matching"), named("random_kout", 2),
                                  named("one_peer_exponential"), named("ring")}) {
    INFO(c.graph);
    REQUIRE(is_time_varying(c) == (c.graph != "ring"));
    bool seeds_differ = false, rounds_differ = false;
    for (std::int64_t round = 0; round < 16; ++round) {
      // Computed afresh, as each rank would in its own process: same inputs, same graph.
      const Graph a = graph_at(c, 10, 1234, round);
      const Graph b = graph_at(c, 10, 1234, round);
      REQUIRE(a.out == b.out);
      REQUIRE(a.directed == b.directed);
      seeds_differ = seeds_differ || graph_at(c, 10, 1235, round).out != a.out;
      rounds_differ = rounds_differ || graph_at(c, 10, 1234, round + 1).out != a.out;
    }
    const bool random = c.graph.rfind("random", 0) == 0;
    REQUIRE(seeds_differ == random);
    REQUIRE(rounds_differ == is_time_varying(c));
  }
}

TEST_CASE("random matching pairs ranks both ways, leaving one out when n is odd", "[topology]") {
  for (int n : {2, 7, 8}) {
    for (std::int64_t round = 0; round < 50; ++round) {
      const Graph g = random_matching(n, 99, round);
      REQUIRE_FALSE(g.directed);
      int alone = 0;
      for (int i = 0; i < n; ++i) {
        REQUIRE(g.out[i].size() <= 1);
        if (g.out[i].empty()) {
          ++alone;
        } else {
          REQUIRE(g.out[i][0] != i);
          REQUIRE(g.out[g.out[i][0]] == std::vector<int>{i});
        }
      }
      REQUIRE(alone == n % 2);
    }
  }
}

TEST_CASE("gossipgrad pairs each rank with one partner per hypercube dimension, relabelled "
          "every period", "[topology]") {
  for (int n : {2, 8, 16}) {
    CAPTURE(n);
    const int tau = n == 2 ? 1 : n == 8 ? 3 : 4;
    REQUIRE(is_time_varying(named("gossipgrad")));
    REQUIRE(period(named("gossipgrad"), n) == 0);
    std::vector<std::vector<int>> first_period;
    bool rotated = false;
    for (std::int64_t round = 0; round < 4 * tau; ++round) {
      const Graph g = gossipgrad(n, 21, round);
      REQUIRE_FALSE(g.directed);
      REQUIRE(g.out == graph_at(named("gossipgrad"), n, 21, round).out);
      std::set<int> seen;
      for (int i = 0; i < n; ++i) {
        REQUIRE(g.out[i].size() == 1);
        const int j = g.out[i][0];
        REQUIRE(j != i);
        REQUIRE(g.out[j] == std::vector<int>{i});
        seen.insert(j);
      }
      REQUIRE(seen.size() == static_cast<std::size_t>(n));
      // Within a period the partners of one rank are tau distinct ranks (one per dimension).
      if (round < tau) {
        first_period.push_back({});
        for (int i = 0; i < n; ++i) first_period.back().push_back(g.out[i][0]);
      } else if (n > 2) {
        const auto& same = first_period[static_cast<std::size_t>(round % tau)];
        for (int i = 0; i < n; ++i) rotated = rotated || g.out[i][0] != same[i];
      }
    }
    for (int i = 0; i < n; ++i) {
      std::set<int> partners;
      for (const auto& round : first_period) partners.insert(round[i]);
      REQUIRE(partners.size() == static_cast<std::size_t>(tau));
    }
    if (n > 2) CHECK(rotated);  // later periods pair ranks differently
  }
  REQUIRE(gossipgrad(1, 21, 0).out == std::vector<std::vector<int>>{{}});
  REQUIRE_THROWS_WITH(graph_at(named("gossipgrad"), 6, 0, 0),
                      Catch::Contains("gossipgrad") && Catch::Contains("power of 2"));
}

TEST_CASE("random matching draws every pair about equally often", "[topology]") {
  const int n = 6, rounds = 3000;
  std::vector<int> count(n * n, 0);
  for (std::int64_t round = 0; round < rounds; ++round) {
    const Graph g = random_matching(n, 5, round);
    for (int i = 0; i < n; ++i) {
      for (int j : g.out[i]) ++count[i * n + j];
    }
  }
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      const double share = static_cast<double>(count[i * n + j]) / rounds;  // expect 1/5
      INFO(i << "-" << j << ": " << share);
      REQUIRE(share > 0.17);
      REQUIRE(share < 0.23);
    }
  }
}

TEST_CASE("random k-out sends to k distinct others", "[topology]") {
  for (int k : {1, 3, 6}) {
    for (std::int64_t round = 0; round < 30; ++round) {
      const Graph g = random_kout(7, k, 3, round);
      REQUIRE(g.directed);
      for (int j = 0; j < 7; ++j) {
        REQUIRE(static_cast<int>(g.out[j].size()) == k);
        REQUIRE(std::adjacent_find(g.out[j].begin(), g.out[j].end()) == g.out[j].end());
        for (int i : g.out[j]) {
          REQUIRE(i != j);
          REQUIRE((i >= 0 && i < 7));
        }
      }
    }
  }
  REQUIRE_THROWS_AS(random_kout(4, 4, 0, 0), ConfigError);
  REQUIRE_THROWS_AS(graph_at(named("random_matching"), 4, 0, -1), ConfigError);
}

TEST_CASE("one-peer exponential rounds multiply to exact averaging for n a power of 2",
          "[topology]") {
  for (int n : {2, 4, 8, 16, 32}) {
    const TopologyConfig c = named("one_peer_exponential");
    const int tau = period(c, n);
    REQUIRE((1 << tau) == n);
    for (std::int64_t first : {0, 3}) {  // any tau consecutive rounds cover every hop
      const MixingMatrix p = product(c, n, 0, first, tau);
      for (double v : p.w) REQUIRE(v == Approx(1.0 / n).margin(1e-14));
    }
    const Spectrum s = analyze_schedule(c, n, 0);
    REQUIRE(s.rounds == tau);
    REQUIRE(s.second_eigenvalue < 1e-12);
    REQUIRE(s.rounds_to_10x == tau);
  }
  // For other n, one period is not exact, but it still mixes.
  const TopologyConfig c = named("one_peer_exponential");
  REQUIRE(period(c, 12) == 4);
  REQUIRE(one_peer_exponential(12, 3).out[10] == std::vector<int>{(10 + 8) % 12});
  const Spectrum s12 = analyze_schedule(c, 12, 0);
  REQUIRE(s12.second_eigenvalue > 1e-6);
  REQUIRE(s12.second_eigenvalue < 1.0);
}

TEST_CASE("periods and analysis windows", "[topology]") {
  REQUIRE(period(named("torus"), 16) == 1);
  REQUIRE(period(named("one_peer_exponential"), 1) == 1);
  REQUIRE(period(named("one_peer_exponential"), 9) == 4);
  REQUIRE(period(named("random_matching"), 16) == 0);
  REQUIRE(analysis_window(named("random_matching"), 16) == 16);
  REQUIRE(analysis_window(named("random_kout"), 3) == 8);
  REQUIRE(analysis_window(named("exponential"), 16) == 1);
}
