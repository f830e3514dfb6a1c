#include "topology/graph.h"

#include <algorithm>
#include <cstddef>

#include <fmt/format.h>

#include "core/error.h"
#include "topology/registry.h"

namespace murmur::topology {
namespace {

// The rows whose names an error about stray topology.edges should suggest (custom).
std::string graphs_taking_edges() {
  std::string names;
  for (const GraphInfo* g : graphs()) {
    if (g->takes_edges) names += fmt::format("{}{}", names.empty() ? "" : " | ", g->name);
  }
  return names;
}

std::string weights_taking_matrix() {
  std::string names;
  for (const WeightsInfo* w : weights_schemes()) {
    if (w->takes_matrix) names += fmt::format("{}{}", names.empty() ? "" : " | ", w->name);
  }
  return names;
}

}  // namespace

std::vector<std::vector<int>> in_neighbors(const Graph& g) {
  std::vector<std::vector<int>> in(static_cast<std::size_t>(g.n));
  for (int j = 0; j < g.n; ++j) {
    for (int i : g.out[j]) in[i].push_back(j);  // j ascending, so each in[i] ends up sorted
  }
  return in;
}

std::vector<std::vector<int>> undirected_neighbors(const Graph& g) {
  std::vector<std::vector<int>> both = in_neighbors(g);
  for (int i = 0; i < g.n; ++i) {
    auto& row = both[static_cast<std::size_t>(i)];
    const std::size_t ins = row.size();
    row.insert(row.end(), g.out[i].begin(), g.out[i].end());
    std::inplace_merge(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(ins), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());
  }
  return both;
}

bool has_edge(const Graph& g, int from, int to) {
  const auto& row = g.out[from];
  return std::binary_search(row.begin(), row.end(), to);
}

bool is_connected(const Graph& g) {
  if (g.n <= 1) return true;
  // Strongly connected iff rank 0 reaches everyone along out-edges and along in-edges.
  auto reaches_all = [&](const std::vector<std::vector<int>>& adj) {
    std::vector<char> seen(static_cast<std::size_t>(g.n), 0);
    std::vector<int> stack{0};
    seen[0] = 1;
    int count = 1;
    while (!stack.empty()) {
      const int u = stack.back();
      stack.pop_back();
      for (int v : adj[u]) {
        if (!seen[v]) {
          seen[v] = 1;
          ++count;
          stack.push_back(v);
        }
      }
    }
    return count == g.n;
  };
  return reaches_all(g.out) && reaches_all(in_neighbors(g));
}

void validate_world(const TopologyConfig& c, int n) {
  if (n < 1) throw ConfigError(fmt::format("world.size: {} peers (must be >= 1)", n));
  const GraphInfo& graph = find_graph(c.graph);
  const WeightsInfo& weights = find_weights(c.weights);
  // Inputs that only some rows read: given to any other, they would be silently ignored.
  if (!c.edges.empty() && !graph.takes_edges) {
    throw ConfigError(fmt::format(
        "topology.edges: given, but topology.graph is '{}' (set graph: {} to use them)", c.graph,
        graphs_taking_edges()));
  }
  if (!c.matrix.empty() && !weights.takes_matrix) {
    throw ConfigError(fmt::format(
        "topology.matrix: given, but topology.weights is '{}' (set weights: {} to use it)",
        c.weights, weights_taking_matrix()));
  }
  graph.validate(c, n);
  weights.validate(c, graph, n);
}

Graph static_graph(const TopologyConfig& c, int n) {
  validate_world(c, n);
  const GraphInfo& graph = find_graph(c.graph);
  if (graph.time_varying) {
    throw ConfigError(fmt::format(
        "topology.graph: '{}' changes every round; build it with graph_at(config, n, seed, round)",
        c.graph));
  }
  return graph.build(c, n, 0, 0);
}

Graph from_edges(int n, const std::vector<std::vector<int>>& edges, bool directed) {
  std::vector<std::vector<int>> out(static_cast<std::size_t>(n));
  for (std::size_t e = 0; e < edges.size(); ++e) {
    const auto& pair = edges[e];
    if (pair.size() != 2) {
      throw ConfigError(fmt::format(
          "topology.edges[{}]: an edge is [from, to]; got {} numbers", e, pair.size()));
    }
    const int from = pair[0], to = pair[1];
    if (from < 0 || from >= n || to < 0 || to >= n) {
      throw ConfigError(fmt::format("topology.edges[{}]: [{}, {}] names a rank outside [0, {})",
                                    e, from, to, n));
    }
    if (from == to) {
      throw ConfigError(fmt::format(
          "topology.edges[{}]: [{}, {}] is a self-loop (a rank always keeps its own value)", e,
          from, to));
    }
    out[from].push_back(to);
    if (!directed) out[to].push_back(from);
  }
  return make_graph(n, directed, std::move(out));
}

}  // namespace murmur::topology
