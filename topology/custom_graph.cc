// The custom graph: edges from topology.edges, or else the nonzero off-diagonal pattern of
// topology.matrix (W[i][j] != 0 means j sends to i). Its row is listed in registry.cc.
// Pure functions; thread-safe.
#include <cstddef>
#include <vector>

#include "core/error.h"
#include "topology/graph.h"
#include "topology/registry.h"

namespace murmur::topology {
namespace {

// Returns true iff every nonzero W[i][j] (i != j) has a nonzero W[j][i]: both directions of
// each link are listed, so the matrix pattern is an undirected graph. Tolerates a ragged
// matrix, since --list and validation may ask before the shape is checked.
bool symmetric_pattern(const std::vector<std::vector<double>>& m) {
  for (std::size_t i = 0; i < m.size(); ++i) {
    for (std::size_t j = 0; j < m[i].size(); ++j) {
      if (i == j || m[i][j] == 0.0) continue;
      if (j >= m.size() || i >= m[j].size() || m[j][i] == 0.0) return false;
    }
  }
  return true;
}

bool custom_directed(const TopologyConfig& c) {
  return c.directed || (c.edges.empty() && !symmetric_pattern(c.matrix));
}

void validate_custom(const TopologyConfig& c, int n) {
  if (c.edges.empty() && c.matrix.empty()) {
    throw ConfigError("topology.edges: a custom graph needs topology.edges or topology.matrix");
  }
  from_edges(n, c.edges, c.directed);  // throws on a malformed edge
  if (c.edges.empty()) check_matrix_shape(c, n);  // the graph is read off the matrix
}

Graph build_custom(const TopologyConfig& c, int n, std::uint64_t, std::int64_t) {
  if (!c.edges.empty()) return from_edges(n, c.edges, c.directed);
  std::vector<std::vector<int>> edges;  // from the matrix: W[i][j] != 0 means j -> i
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i != j && c.matrix[i][j] != 0.0) edges.push_back({j, i});
    }
  }
  Graph g = from_edges(n, edges, /*directed=*/true);
  g.directed = custom_directed(c);  // both directions listed: it is undirected
  return g;
}

}  // namespace

extern constinit const GraphInfo kCustomGraph{
    .name = "custom",
    .summary = "topology.edges ([from, to] pairs; one-way if topology.directed), or the "
               "nonzero pattern of topology.matrix",
    .directed = custom_directed,
    .time_varying = false,
    .period = period_static,
    .validate = validate_custom,
    .build = build_custom,
    .takes_edges = true};

}  // namespace murmur::topology
