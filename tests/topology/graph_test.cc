// Graph builders and world-size validation: degrees, symmetry, connectivity, and the errors a
// world size a graph cannot take must raise.
#include <catch2/catch.hpp>

#include <string>

#include "core/config.h"
#include "core/error.h"
#include "topology/dot.h"
#include "topology/graph.h"

using namespace murmur;
using namespace murmur::topology;

namespace {

TopologyConfig named(const std::string& graph) {
  TopologyConfig c;
  c.graph = graph;
  return c;
}

void require_symmetric(const Graph& g) {
  for (int i = 0; i < g.n; ++i) {
    for (int j : g.out[i]) REQUIRE(has_edge(g, j, i));
  }
}

int degree(const Graph& g, int i) { return static_cast<int>(g.out[i].size()); }

}  // namespace

TEST_CASE("static graphs have the degrees and symmetry they promise", "[topology]") {
  const Graph r = ring(8);
  require_symmetric(r);
  for (int i = 0; i < 8; ++i) {
    REQUIRE(degree(r, i) == 2);
    REQUIRE(has_edge(r, i, (i + 1) % 8));
    REQUIRE(has_edge(r, i, (i + 7) % 8));
  }
  REQUIRE(degree(ring(2), 0) == 1);  // the two neighbors coincide
  REQUIRE(degree(ring(1), 0) == 0);

  const Graph d = ring_directed(5);
  REQUIRE(d.directed);
  for (int i = 0; i < 5; ++i) REQUIRE(d.out[i] == std::vector<int>{(i + 1) % 5});

  const Graph h = hypercube(16);
  require_symmetric(h);
  for (int i = 0; i < 16; ++i) REQUIRE(degree(h, i) == 4);
  REQUIRE(has_edge(h, 5, 5 ^ 8));

  const Graph t = torus(12);  // 3 x 4
  require_symmetric(t);
  for (int i = 0; i < 12; ++i) REQUIRE(degree(t, i) == 4);
  REQUIRE(has_edge(t, 0, 3));  // row 0 wraps: col 0 <-> col 3
  REQUIRE(has_edge(t, 0, 8));  // col 0 wraps: row 0 <-> row 2

  const Graph e = exponential(12);  // distances 1, 2, 4, 8
  REQUIRE(e.directed);
  REQUIRE(e.out[0] == std::vector<int>{1, 2, 4, 8});
  REQUIRE(e.out[11] == std::vector<int>{0, 1, 3, 7});

  const Graph k = complete(6);
  for (int i = 0; i < 6; ++i) REQUIRE(degree(k, i) == 5);

  for (const Graph& g : {r, d, h, t, e, k}) REQUIRE(is_connected(g));
}

TEST_CASE("undirected neighbors take every edge both ways and each once", "[topology]") {
  // Directed: rank 0 sends to 1, 2, 4 and hears from 7, 6, 4 (4 once).
  const auto e = undirected_neighbors(exponential(8));
  CHECK(e[0] == std::vector<int>{1, 2, 4, 6, 7});
  CHECK(undirected_neighbors(ring_directed(4))[2] == std::vector<int>{1, 3});
  const Graph r = ring(5);
  CHECK(undirected_neighbors(r) == r.out);  // undirected already
}

TEST_CASE("torus picks the most square shape and names sizes that work", "[topology]") {
  REQUIRE(torus_shape(9) == std::pair{3, 3});
  REQUIRE(torus_shape(12) == std::pair{3, 4});
  REQUIRE(torus_shape(16) == std::pair{4, 4});
  REQUIRE(torus_shape(36) == std::pair{6, 6});
  REQUIRE(torus_shape(30) == std::pair{5, 6});
  REQUIRE_THROWS_WITH(torus_shape(10), Catch::Contains("nearest: 9 or 12"));
  REQUIRE_THROWS_AS(torus_shape(13), ConfigError);
  REQUIRE_THROWS_AS(torus_shape(4), ConfigError);   // 2 x 2 would double edges
  REQUIRE_THROWS_AS(validate_world(named("torus"), 14), ConfigError);
}

TEST_CASE("a world size a graph cannot take is a ConfigError", "[topology]") {
  REQUIRE_THROWS_WITH(validate_world(named("hypercube"), 6),
                      Catch::Contains("power of 2") && Catch::Contains("6"));
  REQUIRE_NOTHROW(validate_world(named("hypercube"), 8));
  TopologyConfig kout = named("random_kout");
  kout.k = 4;
  REQUIRE_THROWS_WITH(validate_world(kout, 4), Catch::Contains("topology.k"));
  REQUIRE_NOTHROW(validate_world(kout, 5));
  REQUIRE_THROWS_AS(validate_world(named("ring"), 0), ConfigError);
  REQUIRE_THROWS_WITH(validate_world(named("moebius"), 4), Catch::Contains("unknown graph"));
  TopologyConfig metro = named("ring_directed");
  metro.weights = "metropolis";
  REQUIRE_THROWS_WITH(validate_world(metro, 4), Catch::Contains("undirected"));
}

TEST_CASE("custom graphs come from an edge list or from the matrix pattern", "[topology]") {
  TopologyConfig c = named("custom");
  c.edges = {{0, 1}, {1, 2}, {2, 3}};
  Graph path = static_graph(c, 4);
  REQUIRE_FALSE(path.directed);
  REQUIRE(path.out[1] == std::vector<int>{0, 2});
  REQUIRE(is_connected(path));

  c.directed = true;
  Graph one_way = static_graph(c, 4);
  REQUIRE(one_way.out[1] == std::vector<int>{2});
  REQUIRE_FALSE(is_connected(one_way));  // nothing gets back to 0

  c.edges = {{0, 1}, {2, 7}};
  REQUIRE_THROWS_WITH(validate_world(c, 4), Catch::Contains("topology.edges[1]"));
  c.edges = {{1, 1}};
  REQUIRE_THROWS_WITH(validate_world(c, 4), Catch::Contains("self-loop"));
  c.edges = {{1, 2, 3}};
  REQUIRE_THROWS_AS(validate_world(c, 4), ConfigError);
  c.edges.clear();
  REQUIRE_THROWS_WITH(validate_world(c, 4), Catch::Contains("needs topology.edges"));

  TopologyConfig m = named("custom");
  m.weights = "custom";
  // Rows filled one by one: g++ 12.2 -march=native (AVX-512) miscompiles nested braced lists
  // of doubles (see mixing_test.cc).
  m.matrix.assign(3, std::vector<double>(3, 0.0));
  m.matrix[0][0] = m.matrix[0][1] = m.matrix[1][0] = m.matrix[1][1] = 0.5;
  m.matrix[2][1] = m.matrix[2][2] = 0.5;
  Graph from_matrix = static_graph(m, 3);
  REQUIRE(from_matrix.directed);  // 1 -> 2 has no way back
  REQUIRE(from_matrix.out[1] == std::vector<int>{0, 2});
  REQUIRE(from_matrix.out[0] == std::vector<int>{1});
  m.matrix.pop_back();
  REQUIRE_THROWS_WITH(validate_world(m, 3), Catch::Contains("2 rows for 3 peers"));

  TopologyConfig stray = named("ring");
  stray.edges = {{0, 1}};
  REQUIRE_THROWS_WITH(validate_world(stray, 4), Catch::Contains("graph: custom"));
}

TEST_CASE("DOT output lists each undirected edge once", "[topology]") {
  const std::string undirected = to_dot(ring(4), "r");
  REQUIRE(undirected.rfind("graph \"r\"", 0) == 0);
  REQUIRE(undirected.find("0 -- 1;") != std::string::npos);
  REQUIRE(undirected.find("1 -- 0;") == std::string::npos);
  const std::string directed = to_dot(ring_directed(3), "d");
  REQUIRE(directed.rfind("digraph", 0) == 0);
  REQUIRE(directed.find("2 -> 0;") != std::string::npos);
}
