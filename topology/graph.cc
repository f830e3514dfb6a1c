#include "topology/graph.h"

#include <algorithm>
#include <cstddef>

#include <fmt/format.h>

#include "core/error.h"

namespace murmur::topology {
namespace {

bool is_power_of_two(int n) { return n >= 1 && (n & (n - 1)) == 0; }

bool is_directed_name(const TopologyConfig& c) {
  return c.graph == "ring_directed" || c.graph == "exponential" ||
         c.graph == "one_peer_exponential" || c.graph == "random_kout" ||
         (c.graph == "custom" && c.directed);
}

// Sorts and dedupes each list; every builder funnels through here so `out` is canonical.
Graph finish(int n, bool directed, std::vector<std::vector<int>> out) {
  for (auto& row : out) {
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());
  }
  return Graph{n, directed, std::move(out)};
}

// Returns a torus shape for n, or {0, 0} if there is none.
std::pair<int, int> find_torus_shape(int n) {
  int best = 0;
  for (int rows = 3; rows * rows <= n; ++rows) {
    if (n % rows == 0 && n / rows >= 3) best = rows;  // the last one found is the most square
  }
  if (best == 0) return {0, 0};
  return {best, n / best};
}

}  // namespace

std::vector<std::vector<int>> in_neighbors(const Graph& g) {
  std::vector<std::vector<int>> in(static_cast<std::size_t>(g.n));
  for (int j = 0; j < g.n; ++j) {
    for (int i : g.out[j]) in[i].push_back(j);  // j ascending, so each in[i] ends up sorted
  }
  return in;
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

std::pair<int, int> torus_shape(int n) {
  const auto shape = find_torus_shape(n);
  if (shape.first != 0) return shape;
  int below = n - 1;
  while (below >= 9 && find_torus_shape(below).first == 0) --below;
  int above = std::max(n + 1, 9);
  while (find_torus_shape(above).first == 0) ++above;
  const std::string nearest = below >= 9 ? fmt::format("{} or {}", below, above)
                                         : fmt::format("{}", above);
  throw ConfigError(fmt::format(
      "topology.graph: torus needs world.size = rows * cols with rows, cols >= 3 (9, 12, 15, 16, "
      "18, 20, ...); {} peers have no such shape (nearest: {})",
      n, nearest));
}

void validate_world(const TopologyConfig& c, int n) {
  if (n < 1) throw ConfigError(fmt::format("world.size: {} peers (must be >= 1)", n));
  static const char* const kGraphs[] = {"ring",        "ring_directed",        "torus",
                                        "complete",    "hypercube",            "exponential",
                                        "one_peer_exponential", "random_matching",
                                        "random_kout", "custom"};
  if (std::find(std::begin(kGraphs), std::end(kGraphs), c.graph) == std::end(kGraphs)) {
    throw ConfigError(fmt::format("topology.graph: unknown graph '{}'", c.graph));
  }
  if (c.weights != "uniform" && c.weights != "metropolis" && c.weights != "custom") {
    throw ConfigError(fmt::format(
        "topology.weights: unknown scheme '{}' (uniform | metropolis | custom)", c.weights));
  }
  if (c.graph == "hypercube" && !is_power_of_two(n)) {
    throw ConfigError(fmt::format(
        "topology.graph: hypercube needs world.size to be a power of 2; got {} peers", n));
  }
  if (c.graph == "torus") torus_shape(n);
  if (c.graph == "random_kout" && (c.k < 1 || c.k > n - 1)) {
    throw ConfigError(fmt::format(
        "topology.k: random_kout sends to k = {} others, which needs 1 <= k <= world.size - 1 = {}",
        c.k, n - 1));
  }
  if (!c.edges.empty() && c.graph != "custom") {
    throw ConfigError(fmt::format(
        "topology.edges: given, but topology.graph is '{}' (set graph: custom to use them)",
        c.graph));
  }
  if (c.graph == "custom") {
    if (c.edges.empty() && c.matrix.empty()) {
      throw ConfigError("topology.edges: a custom graph needs topology.edges or topology.matrix");
    }
    from_edges(n, c.edges, c.directed);  // throws on a malformed edge
  }
  if (!c.matrix.empty()) {
    if (c.weights != "custom") {
      throw ConfigError(fmt::format(
          "topology.matrix: given, but topology.weights is '{}' (set weights: custom to use it)",
          c.weights));
    }
    if (static_cast<int>(c.matrix.size()) != n) {
      throw ConfigError(fmt::format("topology.matrix: {} rows for {} peers (must be {} x {})",
                                    c.matrix.size(), n, n, n));
    }
    for (std::size_t i = 0; i < c.matrix.size(); ++i) {
      if (static_cast<int>(c.matrix[i].size()) != n) {
        throw ConfigError(fmt::format("topology.matrix: row {} has {} entries (must be {})", i,
                                      c.matrix[i].size(), n));
      }
    }
  }
  if (c.weights == "custom") {
    if (c.matrix.empty()) throw ConfigError("topology.weights: custom needs topology.matrix");
    if (c.graph == "one_peer_exponential" || c.graph == "random_matching" ||
        c.graph == "random_kout") {
      throw ConfigError(fmt::format(
          "topology.weights: custom is one fixed matrix; graph '{}' changes every round", c.graph));
    }
  }
  if (c.weights == "metropolis" && is_directed_name(c)) {
    throw ConfigError(fmt::format(
        "topology.weights: metropolis needs an undirected graph; '{}' is directed (uniform "
        "weights are column-stochastic there, and doubly stochastic on circulant graphs)",
        c.graph));
  }
}

Graph static_graph(const TopologyConfig& c, int n) {
  validate_world(c, n);
  if (c.graph == "ring") return ring(n);
  if (c.graph == "ring_directed") return ring_directed(n);
  if (c.graph == "torus") return torus(n);
  if (c.graph == "complete") return complete(n);
  if (c.graph == "hypercube") return hypercube(n);
  if (c.graph == "exponential") return exponential(n);
  if (c.graph == "custom") {
    if (!c.edges.empty()) return from_edges(n, c.edges, c.directed);
    std::vector<std::vector<int>> edges;  // from the matrix: W[i][j] != 0 means j -> i
    bool symmetric = true;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        if (i == j || c.matrix[i][j] == 0.0) continue;
        edges.push_back({j, i});
        symmetric = symmetric && c.matrix[j][i] != 0.0;
      }
    }
    Graph g = from_edges(n, edges, /*directed=*/true);
    g.directed = c.directed || !symmetric;  // both directions listed: it is undirected
    return g;
  }
  throw ConfigError(fmt::format(
      "topology.graph: '{}' changes every round; build it with graph_at(config, n, seed, round)",
      c.graph));
}

Graph ring(int n) {
  std::vector<std::vector<int>> out(static_cast<std::size_t>(n));
  for (int i = 0; i < n && n > 1; ++i) out[i] = {(i + 1) % n, (i + n - 1) % n};
  return finish(n, false, std::move(out));
}

Graph ring_directed(int n) {
  std::vector<std::vector<int>> out(static_cast<std::size_t>(n));
  for (int i = 0; i < n && n > 1; ++i) out[i] = {(i + 1) % n};
  return finish(n, true, std::move(out));
}

Graph torus(int n) {
  const auto [rows, cols] = torus_shape(n);
  std::vector<std::vector<int>> out(static_cast<std::size_t>(n));
  for (int r = 0; r < rows; ++r) {
    for (int col = 0; col < cols; ++col) {
      out[r * cols + col] = {((r + 1) % rows) * cols + col, ((r + rows - 1) % rows) * cols + col,
                             r * cols + (col + 1) % cols, r * cols + (col + cols - 1) % cols};
    }
  }
  return finish(n, false, std::move(out));
}

Graph complete(int n) {
  std::vector<std::vector<int>> out(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (j != i) out[i].push_back(j);
    }
  }
  return finish(n, false, std::move(out));
}

Graph hypercube(int n) {
  if (!is_power_of_two(n)) {
    throw ConfigError(fmt::format(
        "topology.graph: hypercube needs world.size to be a power of 2; got {} peers", n));
  }
  std::vector<std::vector<int>> out(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    for (int bit = 1; bit < n; bit <<= 1) out[i].push_back(i ^ bit);
  }
  return finish(n, false, std::move(out));
}

Graph exponential(int n) {
  std::vector<std::vector<int>> out(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    for (int d = 1; d < n; d <<= 1) out[i].push_back((i + d) % n);
  }
  return finish(n, true, std::move(out));
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
  return finish(n, directed, std::move(out));
}

}  // namespace murmur::topology
