#include "topology/mixing.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include <fmt/format.h>

#include "core/error.h"
#include "topology/registry.h"
#include "topology/schedule.h"

namespace murmur::topology {
namespace {

// Custom weights: topology.matrix as given, checked entry by entry against the built graph.
void check_custom(const Graph& g, const TopologyConfig& c) {
  const int n = g.n;
  check_matrix_shape(c, n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      const double v = c.matrix[i][j];
      if (!std::isfinite(v)) {
        throw ConfigError(fmt::format("topology.matrix[{}][{}] = {} is not finite", i, j, v));
      }
      if (i != j && v != 0.0 && !has_edge(g, j, i)) {
        throw ConfigError(fmt::format(
            "topology.matrix[{}][{}] = {} but rank {} does not send to rank {} in the graph "
            "(W[i][j] is the weight rank i gives to what it receives from j)",
            i, j, v, j, i));
      }
    }
  }
}

int degree(const Graph& g, int i) { return static_cast<int>(g.out[i].size()); }

// Xiao & Boyd 2004: W_ij = 1 / (1 + max(deg_i, deg_j)) on an edge.
double metropolis_off(const Graph& g, const TopologyConfig&, int i, int j) {
  return 1.0 / (1 + std::max(degree(g, i), degree(g, j)));
}

// One graph under one scheme, entry by entry, so rank_mixing needs only O(degree) entries of
// W instead of building all n^2.
class Weights {
 public:
  Weights(const Graph& g, const TopologyConfig& c)
      : g_(g), c_(c), scheme_(find_weights(c.weights)) {
    scheme_.check(g, c);
  }
  // W_ij for an edge j -> i, i != j.
  double off(int i, int j) const { return scheme_.off(g_, c_, i, j); }
  double self(int i) const { return scheme_.self(g_, c_, i); }

 private:
  const Graph& g_;
  const TopologyConfig& c_;
  const WeightsInfo& scheme_;
};

const char* line_name(bool rows) { return rows ? "row" : "column"; }

void check_sums(const MixingMatrix& w, bool rows, std::string_view what, double tol) {
  for (int a = 0; a < w.n; ++a) {
    double sum = 0.0;
    for (int b = 0; b < w.n; ++b) {
      const double v = rows ? w(a, b) : w(b, a);
      if (!std::isfinite(v)) {
        throw ConfigError(fmt::format("{}: entry [{}][{}] is {}", what, rows ? a : b,
                                      rows ? b : a, v));
      }
      sum += v;
    }
    if (std::abs(sum - 1.0) > tol) {
      throw ConfigError(fmt::format("{}: {} {} sums to {:.6g} (must be 1, off by {:.3g})", what,
                                    line_name(rows), a, sum, std::abs(sum - 1.0)));
    }
  }
}

}  // namespace

MixingMatrix mixing_matrix(const Graph& g, const TopologyConfig& c) {
  const Weights weights(g, c);
  MixingMatrix m{g.n, std::vector<double>(static_cast<std::size_t>(g.n) * g.n, 0.0)};
  for (int j = 0; j < g.n; ++j) {
    m.at(j, j) = weights.self(j);
    for (int i : g.out[j]) m.at(i, j) = weights.off(i, j);
  }
  return m;
}

MixingMatrix mixing_at(const TopologyConfig& c, int n, std::uint64_t seed, std::int64_t round) {
  return mixing_matrix(graph_at(c, n, seed, round), c);
}

void check_stochastic(const MixingMatrix& w, Stochastic need, std::string_view what, double tol) {
  if (need != Stochastic::kColumn) check_sums(w, /*rows=*/true, what, tol);
  if (need != Stochastic::kRow) check_sums(w, /*rows=*/false, what, tol);
}

void check_row_stochastic(const MixingMatrix& w, std::string_view what, double tol) {
  check_stochastic(w, Stochastic::kRow, what, tol);
}

void check_column_stochastic(const MixingMatrix& w, std::string_view what, double tol) {
  check_stochastic(w, Stochastic::kColumn, what, tol);
}

void check_doubly_stochastic(const MixingMatrix& w, std::string_view what, double tol) {
  check_stochastic(w, Stochastic::kDoubly, what, tol);
}

RankMixing rank_mixing(const Graph& g, const TopologyConfig& c, int rank) {
  if (rank < 0 || rank >= g.n) {
    throw ConfigError(fmt::format("world.rank: {} is outside [0, {})", rank, g.n));
  }
  const Weights weights(g, c);
  RankMixing r;
  r.self_weight = weights.self(rank);
  for (int j = 0; j < g.n; ++j) {  // in-neighbors of rank, ascending (out lists are sorted)
    if (j == rank || !has_edge(g, j, rank)) continue;
    const double v = weights.off(rank, j);
    if (v == 0.0) continue;
    r.recv_from.push_back(j);
    r.recv_weights.push_back(v);
  }
  for (int k : g.out[rank]) {
    const double v = weights.off(k, rank);
    if (v == 0.0) continue;
    r.send_to.push_back(k);
    r.send_weights.push_back(v);
  }
  return r;
}

RankMixing rank_mixing(const TopologyConfig& c, int n, int rank, std::uint64_t seed,
                       std::int64_t round) {
  return rank_mixing(graph_at(c, n, seed, round), c, rank);
}

extern constinit const WeightsInfo kUniformWeights{
    .name = "uniform",
    .summary = "each rank splits its value evenly over itself and its neighbors: doubly "
               "stochastic on regular graphs, column-stochastic on directed ones",
    .validate = [](const TopologyConfig&, const GraphInfo&, int) {},
    .check = [](const Graph&, const TopologyConfig&) {},
    // Undirected: W_ij = 1 / (deg_i + 1), rows sum to 1. Directed: W_ij = 1 / (outdeg_j + 1),
    // columns sum to 1 (what j splits over itself and its out-neighbors).
    .off = [](const Graph& g, const TopologyConfig&, int i, int j) {
      return g.directed ? 1.0 / (degree(g, j) + 1) : 1.0 / (degree(g, i) + 1);
    },
    .self = [](const Graph& g, const TopologyConfig&, int i) { return 1.0 / (degree(g, i) + 1); }};

extern constinit const WeightsInfo kMetropolisWeights{
    .name = "metropolis",
    .summary = "Metropolis-Hastings, 1 / (1 + max(deg_i, deg_j)): symmetric and doubly "
               "stochastic on any undirected graph",
    .validate = [](const TopologyConfig& c, const GraphInfo& graph, int) {
      if (graph.directed(c)) {
        throw ConfigError(fmt::format(
            "topology.weights: metropolis needs an undirected graph; '{}' is directed (uniform "
            "weights are column-stochastic there, and doubly stochastic on circulant graphs)",
            c.graph));
      }
    },
    .check = [](const Graph& g, const TopologyConfig&) {
      if (g.directed) throw ConfigError("topology.weights: metropolis needs an undirected graph");
    },
    .off = metropolis_off,
    .self = [](const Graph& g, const TopologyConfig& c, int i) {
      double rest = 1.0;
      for (int j : g.out[i]) rest -= metropolis_off(g, c, i, j);  // undirected: out = in
      return rest;
    }};

extern constinit const WeightsInfo kCustomWeights{
    .name = "custom",
    .summary = "topology.matrix as given (n x n, W[i][j] nonzero only where j sends to i)",
    .validate = [](const TopologyConfig& c, const GraphInfo& graph, int n) {
      if (c.matrix.empty()) throw ConfigError("topology.weights: custom needs topology.matrix");
      if (graph.time_varying) {
        throw ConfigError(fmt::format(
            "topology.weights: custom is one fixed matrix; graph '{}' changes every round",
            c.graph));
      }
      check_matrix_shape(c, n);
    },
    .check = check_custom,
    .off = [](const Graph&, const TopologyConfig& c, int i, int j) { return c.matrix[i][j]; },
    .self = [](const Graph&, const TopologyConfig& c, int i) { return c.matrix[i][i]; },
    .takes_matrix = true};

}  // namespace murmur::topology
