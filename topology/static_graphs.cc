// The built-in static graphs (ring, ring_directed, torus, complete, hypercube, exponential):
// their builders, declared in graph.h, and their rows, listed in registry.cc. Pure functions.
#include <algorithm>
#include <cstddef>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "topology/graph.h"
#include "topology/registry.h"

namespace murmur::topology {
namespace {

// Returns a torus shape for n, or {0, 0} if there is none.
std::pair<int, int> find_torus_shape(int n) {
  int best = 0;
  for (int rows = 3; rows * rows <= n; ++rows) {
    if (n % rows == 0 && n / rows >= 3) best = rows;  // the last one found is the most square
  }
  if (best == 0) return {0, 0};
  return {best, n / best};
}

// Static rows: built once, the same in every round.
template <Graph (*Builder)(int)>
Graph build_static(const TopologyConfig&, int n, std::uint64_t, std::int64_t) {
  return Builder(n);
}

}  // namespace

void require_power_of_two(std::string_view graph, int n) {
  if (n < 1 || (n & (n - 1)) != 0) {
    throw ConfigError(fmt::format(
        "topology.graph: {} needs world.size to be a power of 2; got {} peers", graph, n));
  }
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

Graph ring(int n) {
  std::vector<std::vector<int>> out(static_cast<std::size_t>(n));
  for (int i = 0; i < n && n > 1; ++i) out[i] = {(i + 1) % n, (i + n - 1) % n};
  return make_graph(n, false, std::move(out));
}

Graph ring_directed(int n) {
  std::vector<std::vector<int>> out(static_cast<std::size_t>(n));
  for (int i = 0; i < n && n > 1; ++i) out[i] = {(i + 1) % n};
  return make_graph(n, true, std::move(out));
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
  return make_graph(n, false, std::move(out));
}

Graph complete(int n) {
  std::vector<std::vector<int>> out(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (j != i) out[i].push_back(j);
    }
  }
  return make_graph(n, false, std::move(out));
}

Graph hypercube(int n) {
  require_power_of_two("hypercube", n);
  std::vector<std::vector<int>> out(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    for (int bit = 1; bit < n; bit <<= 1) out[i].push_back(i ^ bit);
  }
  return make_graph(n, false, std::move(out));
}

Graph exponential(int n) {
  std::vector<std::vector<int>> out(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    for (int d = 1; d < n; d <<= 1) out[i].push_back((i + d) % n);
  }
  return make_graph(n, true, std::move(out));
}

extern constinit const GraphInfo kRingGraph{
    .name = "ring",
    .summary = "i <-> i+1 (mod n): 2 neighbors each, slow to mix on large n",
    .directed = directed_never,
    .time_varying = false,
    .period = period_static,
    .validate = accepts_any_size,
    .build = build_static<ring>};

extern constinit const GraphInfo kRingDirectedGraph{
    .name = "ring_directed",
    .summary = "i -> i+1 (mod n): one out-neighbor each, directed",
    .directed = directed_always,
    .time_varying = false,
    .period = period_static,
    .validate = accepts_any_size,
    .build = build_static<ring_directed>};

extern constinit const GraphInfo kTorusGraph{
    .name = "torus",
    .summary = "4 neighbors on a rows x cols grid that wraps around (n = rows * cols, both >= 3)",
    .directed = directed_never,
    .time_varying = false,
    .period = period_static,
    .validate = [](const TopologyConfig&, int n) { torus_shape(n); },
    .build = build_static<torus>};

extern constinit const GraphInfo kCompleteGraph{
    .name = "complete",
    .summary = "everyone <-> everyone: exact averaging in one round, n - 1 messages each",
    .directed = directed_never,
    .time_varying = false,
    .period = period_static,
    .validate = accepts_any_size,
    .build = build_static<complete>};

extern constinit const GraphInfo kHypercubeGraph{
    .name = "hypercube",
    .summary = "i <-> i xor 2^b: log2 n neighbors each (n a power of 2)",
    .directed = directed_never,
    .time_varying = false,
    .period = period_static,
    .validate = [](const TopologyConfig&, int n) { require_power_of_two("hypercube", n); },
    .build = build_static<hypercube>};

extern constinit const GraphInfo kExponentialGraph{
    .name = "exponential",
    .summary = "i -> i + 2^k (mod n) for every 2^k < n: static exponential graph, directed",
    .directed = directed_always,
    .time_varying = false,
    .period = period_static,
    .validate = accepts_any_size,
    .build = build_static<exponential>};

}  // namespace murmur::topology
