// Communication graphs over the ranks 0..n-1 of one world: who sends to whom in one round.
// A Graph is a plain value built by pure functions of (TopologyConfig, n); nothing here reads
// files, clocks or globals, so every peer builds the same graph by itself. Thread-safe: values only.
// Each graph is a row of registry.h (name, directedness, period, validation, builder); the
// time-varying ones (one-peer exponential, random gossip) are built through schedule.h.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/config.h"

namespace murmur::topology {

// out[i] lists the ranks that rank i sends to in a round, ascending, without i itself and
// without repeats. Rank i therefore *receives* from every j with i in out[j] (see in_neighbors).
// When `directed` is false the relation is symmetric: j in out[i] iff i in out[j].
struct Graph {
  int n = 0;
  bool directed = false;
  std::vector<std::vector<int>> out;
};

// The ranks each rank receives from, ascending: result[i] = { j : i in g.out[j] }.
std::vector<std::vector<int>> in_neighbors(const Graph& g);

// The ranks each rank sends to or receives from, ascending, without repeats: g's edges taken both
// ways (AD-PSGD's pairs average over them whichever way the graph points).
std::vector<std::vector<int>> undirected_neighbors(const Graph& g);

// Returns true iff `from` sends to `to` in g.
bool has_edge(const Graph& g, int from, int to);

// Returns true iff every rank can reach every other along edges (directed: strongly connected).
bool is_connected(const Graph& g);

// The shape of the 2-D torus on n ranks: rows * cols = n with rows, cols >= 3, the most square
// such factorization, rows <= cols (12 -> 3x4, 16 -> 4x4, 36 -> 6x6). Throws ConfigError when
// n has none (primes, 2*p, n < 9), naming the nearest world sizes that work.
std::pair<int, int> torus_shape(int n);

// Throws ConfigError if `config` cannot run on `n` ranks: n < 1, an unknown graph or weights
// scheme (naming the registered ones), topology.edges or topology.matrix given to a graph or
// scheme that does not read them, or whatever the graph's and then the weights' rows refuse
// (registry.h): a hypercube whose n is not a power of 2, a torus without a shape
// (torus_shape), random_kout with k > n - 1, custom edges naming ranks outside [0, n), a custom
// matrix that is not n x n, metropolis weights on a directed graph. The message names the key
// and what would work.
void validate_world(const TopologyConfig& config, int n);

// The graph of a static topology (a row with time_varying false: ring, ring_directed, torus,
// complete, hypercube, exponential, custom), after validate_world. For custom graphs without
// edges, the edges are the nonzero off-diagonal entries of topology.matrix (W[i][j] != 0 means
// j sends to i). Throws ConfigError for a time-varying graph name (use graph_at in schedule.h).
Graph static_graph(const TopologyConfig& config, int n);

// Graphs by name, for tests and tools. Each requires n >= 1; see validate_world for the rest.
Graph ring(int n);                 // i <-> i+1 (mod n)
Graph ring_directed(int n);        // i -> i+1 (mod n)
Graph torus(int n);                // 4 neighbors on a rows x cols grid that wraps around
Graph complete(int n);             // everyone <-> everyone
Graph hypercube(int n);            // i <-> i xor 2^b
Graph exponential(int n);          // i -> i + 2^k (mod n) for every 2^k < n (Assran et al. 2019)
// Edges [from, to] as in topology.edges; undirected edges go both ways. Throws ConfigError on a
// malformed pair, a rank out of range or a self-loop, naming the index in topology.edges.
Graph from_edges(int n, const std::vector<std::vector<int>>& edges, bool directed);

}  // namespace murmur::topology
