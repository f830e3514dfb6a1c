// The table of graphs and weights schemes: one row per graph (GraphInfo) and one per weights
// scheme (WeightsInfo), each defined beside the code that builds it and listed once in
// registry.cc. Everything else (validate_world, graph_at, mixing, murmur-topo --list, config
// choices) asks the rows instead of comparing names. Rows are constants; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "topology/graph.h"

namespace murmur::topology {

// One communication graph. Every function is pure; `validate` runs before `build`, after the
// graph-independent checks of validate_world (n >= 1, known names, stray edges or matrix).
struct GraphInfo {
  std::string_view name;     // the value of topology.graph
  std::string_view summary;  // one line, for murmur-topo --list and docs
  // Returns true iff the graph built for `config` is directed (custom: topology.directed).
  bool (*directed)(const TopologyConfig& config);
  bool time_varying;  // true iff the graph changes between rounds
  // Rounds after which the schedule repeats on n ranks: 1 for a static graph, 0 if never.
  int (*period)(int n);
  // Throws ConfigError, naming the key and what would work, if the graph cannot run on n ranks.
  void (*validate)(const TopologyConfig& config, int n);
  // The graph of round `round` (>= 0), after validate; static graphs ignore seed and round.
  Graph (*build)(const TopologyConfig& config, int n, std::uint64_t seed, std::int64_t round);
  bool takes_edges = false;  // topology.edges is this graph's input (else giving edges is an error)
};

// One way of turning a graph into mixing weights W (mixing.h states the convention).
struct WeightsInfo {
  std::string_view name;     // the value of topology.weights
  std::string_view summary;  // one line, for murmur-topo --list and docs
  // Throws ConfigError if this scheme cannot weigh `graph` as configured on n ranks (metropolis
  // on a directed graph, a custom matrix of the wrong shape or on a time-varying graph).
  void (*validate)(const TopologyConfig& config, const GraphInfo& graph, int n);
  // Throws ConfigError if this scheme cannot weigh the built graph g (mixing_matrix's checks).
  void (*check)(const Graph& g, const TopologyConfig& config);
  // W_ij for an edge j -> i of g, i != j; and W_ii. Called only after check(g, config).
  double (*off)(const Graph& g, const TopologyConfig& config, int i, int j);
  double (*self)(const Graph& g, const TopologyConfig& config, int i);
  bool takes_matrix = false;  // topology.matrix is this scheme's input (else giving it is an error)
};

// Every row, in the fixed order of registry.cc (the order --list prints).
std::span<const GraphInfo* const> graphs();
std::span<const WeightsInfo* const> weights_schemes();

// The names of the rows above, in the same order (the choices of topology.graph / .weights).
std::vector<std::string_view> graph_names();
std::vector<std::string_view> weights_names();

// The row named `name`. Throws ConfigError "topology.graph: unknown graph 'x' (known: ring,
// ...)" (weights: "topology.weights: unknown scheme 'x' (known: ...)") listing every row.
const GraphInfo& find_graph(std::string_view name);
const WeightsInfo& find_weights(std::string_view name);

// Helpers for rows.
inline bool directed_always(const TopologyConfig&) { return true; }
inline bool directed_never(const TopologyConfig&) { return false; }
inline int period_static(int) { return 1; }
inline int period_never(int) { return 0; }
inline void accepts_any_size(const TopologyConfig&, int) {}
// Throws ConfigError "topology.graph: <graph> needs world.size to be a power of 2; got n peers".
void require_power_of_two(std::string_view graph, int n);

// A Graph with each out-list sorted and without repeats, which is what Graph promises; every
// builder that may list a neighbor twice (ring(2), small tori) funnels through here.
Graph make_graph(int n, bool directed, std::vector<std::vector<int>> out);

// Throws ConfigError unless topology.matrix is n x n: "topology.matrix: 2 rows for 3 peers
// (must be 3 x 3)" or "topology.matrix: row 1 has 2 entries (must be 3)".
void check_matrix_shape(const TopologyConfig& config, int n);

}  // namespace murmur::topology
