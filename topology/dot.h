// Graphviz DOT text for a communication graph, for murmur-topo and for reading a topology by
// eye. Returns a string; writing it (and running `dot`) is the caller's business. Thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "topology/graph.h"
#include "topology/mixing.h"

namespace murmur::topology {

// An undirected graph becomes `graph NAME { a -- b; }` with each edge once; a directed one
// `digraph NAME { a -> b; }`. Nodes are named by rank. With `weights`, each edge j -> i is
// labelled W_ij (for an undirected edge: W_ij, and W_ji too where it differs).
std::string to_dot(const Graph& g, std::string_view name, const MixingMatrix* weights = nullptr);

}  // namespace murmur::topology
