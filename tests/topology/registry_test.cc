// The graph and weights tables: names are unique and findable, an unknown name lists the known
// ones, and every row keeps its own promises (the world sizes it accepts build a well-formed
// graph, directed as the row says, varying across rounds iff the row is time-varying, and
// repeating with the row's period). Runs over every registered row, so a new graph is covered
// by adding it to the registry.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "topology/graph.h"
#include "topology/mixing.h"
#include "topology/registry.h"
#include "topology/schedule.h"

using namespace murmur;
using namespace murmur::topology;

namespace {

constexpr std::uint64_t kSeed = 1234;

// A config that runs the row: k = 2 for graphs reading topology.k, and a path 0 - 1 - 2 for
// graphs that take their edges from the config.
TopologyConfig config_for(const GraphInfo& row) {
  TopologyConfig c;
  c.graph = std::string(row.name);
  c.k = 2;
  if (row.takes_edges) c.edges = {{0, 1}, {1, 2}};
  return c;
}

// The world sizes in 1..16 that validate_world accepts for c.
std::vector<int> accepted_sizes(const TopologyConfig& c) {
  std::vector<int> sizes;
  for (int n = 1; n <= 16; ++n) {
    try {
      validate_world(c, n);
      sizes.push_back(n);
    } catch (const ConfigError&) {
    }
  }
  return sizes;
}

void require_well_formed(const Graph& g, int n) {
  REQUIRE(g.n == n);
  REQUIRE(static_cast<int>(g.out.size()) == n);
  for (int i = 0; i < n; ++i) {
    const auto& row = g.out[i];
    REQUIRE(std::is_sorted(row.begin(), row.end()));
    REQUIRE(std::adjacent_find(row.begin(), row.end()) == row.end());
    for (int j : row) {
      REQUIRE(j != i);
      REQUIRE((j >= 0 && j < n));
      if (!g.directed) REQUIRE(has_edge(g, j, i));
    }
  }
}

auto round_graph(const TopologyConfig& c, int n) {
  return [&c, n](std::int64_t round) { return graph_at(c, n, kSeed, round).out; };
}

}  // namespace

TEST_CASE("every graph and weights scheme has one row, found by its name", "[topology]") {
  std::set<std::string_view> seen;
  REQUIRE(graph_names().size() == graphs().size());
  for (std::size_t i = 0; i < graphs().size(); ++i) {
    const GraphInfo& row = *graphs()[i];
    INFO(row.name);
    REQUIRE_FALSE(row.name.empty());
    REQUIRE_FALSE(row.summary.empty());
    REQUIRE(seen.insert(row.name).second);  // unique
    REQUIRE(graph_names()[i] == row.name);  // same order
    REQUIRE(&find_graph(row.name) == &row);
  }
  seen.clear();
  REQUIRE(weights_names().size() == weights_schemes().size());
  for (std::size_t i = 0; i < weights_schemes().size(); ++i) {
    const WeightsInfo& row = *weights_schemes()[i];
    INFO(row.name);
    REQUIRE_FALSE(row.summary.empty());
    REQUIRE(seen.insert(row.name).second);
    REQUIRE(weights_names()[i] == row.name);
    REQUIRE(&find_weights(row.name) == &row);
  }
  // The names core's config accepts today are all registered: no row fell out of the list.
  for (const char* name : {"ring", "ring_directed", "torus", "complete", "hypercube",
                           "exponential", "one_peer_exponential", "random_matching",
                           "gossipgrad", "random_kout", "custom"}) {
    REQUIRE_NOTHROW(find_graph(name));
  }
  for (const char* name : {"uniform", "metropolis", "custom"}) REQUIRE_NOTHROW(find_weights(name));
}

TEST_CASE("an unknown graph or scheme is a ConfigError listing the known ones", "[topology]") {
  REQUIRE_THROWS_AS(find_graph("moebius"), ConfigError);
  REQUIRE_THROWS_WITH(find_graph("moebius"),
                      Catch::StartsWith("topology.graph: unknown graph 'moebius' (known: ring, "));
  TopologyConfig c;
  c.graph = "moebius";
  for (std::string_view name : graph_names()) {
    REQUIRE_THROWS_WITH(validate_world(c, 4), Catch::Contains(std::string(name)));
  }
  REQUIRE_THROWS_WITH(find_weights("lazy"),
                      Catch::StartsWith("topology.weights: unknown scheme 'lazy' (known: "));
  c.graph = "ring";
  c.weights = "lazy";
  for (std::string_view name : weights_names()) {
    REQUIRE_THROWS_WITH(validate_world(c, 4), Catch::Contains(std::string(name)));
  }
  REQUIRE_THROWS_WITH(mixing_matrix(ring(4), c), Catch::Contains("unknown scheme 'lazy'"));
}

TEST_CASE("every graph row builds the graph it describes", "[topology]") {
  for (const GraphInfo* row : graphs()) {
    const TopologyConfig c = config_for(*row);
    INFO(row->name);
    REQUIRE(is_time_varying(c) == row->time_varying);
    const std::vector<int> sizes = accepted_sizes(c);
    REQUIRE_FALSE(sizes.empty());
    for (int n : sizes) {
      INFO("n = " << n);
      REQUIRE(period(c, n) == row->period(n));
      for (std::int64_t round : {0, 1, 5}) {
        const Graph g = graph_at(c, n, kSeed, round);
        require_well_formed(g, n);
        REQUIRE(g.directed == row->directed(c));
      }
      if (row->time_varying) {
        REQUIRE_THROWS_WITH(static_graph(c, n), Catch::Contains("changes every round"));
      } else {
        REQUIRE(static_graph(c, n).out == graph_at(c, n, kSeed, 7).out);
        if (!row->takes_edges) REQUIRE(is_connected(static_graph(c, n)));
      }
    }
  }
}

TEST_CASE("time-varying rows vary across rounds, static ones don't, and periods hold",
          "[topology]") {
  for (const GraphInfo* row : graphs()) {
    const TopologyConfig c = config_for(*row);
    const int n = accepted_sizes(c).back();  // the largest: small worlds have few graphs
    INFO(row->name << ", n = " << n);
    const auto at = round_graph(c, n);
    bool varies = false;
    for (std::int64_t round = 1; round < 16; ++round) varies = varies || at(round) != at(0);
    REQUIRE(varies == row->time_varying);

    const int p = row->period(n);
    REQUIRE(p >= 0);
    if (!row->time_varying) REQUIRE(p == 1);
    if (p > 0) {
      for (std::int64_t round = 0; round < 3 * p; ++round) REQUIRE(at(round + p) == at(round));
    }
    // No shorter shift repeats (every shift, for schedules that never repeat).
    const int shifts = p > 0 ? p - 1 : 16;
    for (int q = 1; q <= shifts; ++q) {
      INFO("shift " << q);
      bool differs = false;
      for (std::int64_t round = 0; round < 8 && !differs; ++round) {
        differs = at(round + q) != at(round);
      }
      REQUIRE(differs);
    }
  }
}

TEST_CASE("every weights scheme gives stochastic weights on the graphs it accepts",
          "[topology]") {
  for (const WeightsInfo* scheme : weights_schemes()) {
    int accepted = 0;
    for (const GraphInfo* row : graphs()) {
      TopologyConfig c = config_for(*row);
      const int n = accepted_sizes(c).back();
      INFO(scheme->name << " on " << row->name << ", n = " << n);
      if (scheme->takes_matrix) {
        if (row->time_varying) continue;  // one matrix cannot follow a changing graph
        // The uniform weights of the graph, given as a matrix, must come back unchanged.
        const MixingMatrix uniform = mixing_at(c, n, kSeed, 0);
        c.matrix.assign(static_cast<std::size_t>(n), std::vector<double>(n, 0.0));
        for (int i = 0; i < n; ++i) {
          for (int j = 0; j < n; ++j) c.matrix[i][j] = uniform(i, j);
        }
      }
      c.weights = std::string(scheme->name);
      try {
        validate_world(c, n);
      } catch (const ConfigError&) {
        continue;  // e.g. metropolis on a directed graph
      }
      ++accepted;
      for (std::int64_t round : {0, 3}) {
        const MixingMatrix w = mixing_at(c, n, kSeed, round);
        // mixing.h: undirected graphs average by pulling (rows), directed ones push (columns).
        if (row->directed(c)) {
          check_column_stochastic(w, scheme->name);
        } else {
          check_row_stochastic(w, scheme->name);
        }
        for (int rank = 0; rank < n; ++rank) {
          REQUIRE(rank_mixing(c, n, rank, kSeed, round).self_weight == w(rank, rank));
        }
      }
    }
    INFO(scheme->name);
    REQUIRE(accepted > 0);
  }
}
