// Mixing weights: how much of each neighbor's value a rank takes in one averaging round.
// Convention, used by every algorithm: x_i <- sum_j W_ij x_j. W_ij != 0 (i != j) only where
// j sends to i, so a rank *receives* from j with weight W_ij. Row-stochastic W (rows sum to 1)
// is averaging by pulling (D-PSGD); column-stochastic W (columns sum to 1) is push-sum, where a
// rank splits its mass over itself and its out-neighbors. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "topology/graph.h"

namespace murmur::topology {

// W as a dense n x n row-major matrix: w[i * n + j] = W_ij, the weight rank i gives rank j's value.
struct MixingMatrix {
  int n = 0;
  std::vector<double> w;
  double operator()(int i, int j) const { return w[static_cast<std::size_t>(i) * n + j]; }
  double& at(int i, int j) { return w[static_cast<std::size_t>(i) * n + j]; }
};

// The weights of `g` under config.weights (a row of registry.h, defined in mixing.cc):
// - uniform, undirected g: W_ij = 1 / (deg_i + 1) for j a neighbor or j = i. Row-stochastic;
//   doubly stochastic on regular graphs (every built-in undirected graph).
// - uniform, directed g: W_ij = 1 / (outdeg_j + 1) for i an out-neighbor of j or i = j: each
//   rank splits its value evenly over itself and its out-neighbors. Column-stochastic; doubly
//   stochastic where in- and out-degrees agree (ring_directed, exponential, one_peer_exponential).
// - metropolis (undirected only): W_ij = 1 / (1 + max(deg_i, deg_j)), W_ii = 1 - sum_j W_ij.
//   Symmetric and doubly stochastic on any undirected graph (Xiao & Boyd 2004).
// - custom: topology.matrix as given. Throws ConfigError naming the entry if a nonzero W_ij has
//   no edge j -> i in g, or an entry is not finite. Stochasticity is checked by check_* below.
// An unknown scheme is a ConfigError naming the registered ones.
MixingMatrix mixing_matrix(const Graph& g, const TopologyConfig& config);

// The matrix of round `round`: mixing_matrix(graph_at(config, n, seed, round), config).
MixingMatrix mixing_at(const TopologyConfig& config, int n, std::uint64_t seed, std::int64_t round);

// Which sums an algorithm needs to be 1: rows (pull averaging), columns (push-sum), or both
// (D-PSGD's convergence to the exact average of the models).
enum class Stochastic { kRow, kColumn, kDoubly };

// Throws ConfigError unless every row (column; both) of w sums to 1 within `tol`, naming the
// first that does not: "<what>: row 3 sums to 0.8 (must be 1, off by 0.2)". `what` names the
// source of the weights, e.g. "topology.matrix" or "topology.weights=uniform on graph custom".
void check_stochastic(const MixingMatrix& w, Stochastic need, std::string_view what,
                      double tol = 1e-9);
void check_row_stochastic(const MixingMatrix& w, std::string_view what = "topology.matrix",
                          double tol = 1e-9);
void check_column_stochastic(const MixingMatrix& w, std::string_view what = "topology.matrix",
                             double tol = 1e-9);
void check_doubly_stochastic(const MixingMatrix& w, std::string_view what = "topology.matrix",
                             double tol = 1e-9);

// One rank's row and column of W, which is all an averaging algorithm needs in a round:
// - pull (row-stochastic): x_r <- self_weight * x_r + sum_k recv_weights[k] * x_{recv_from[k]},
//   sending its plain x_r to every rank in send_to;
// - push-sum (column-stochastic): send send_weights[k] * x_r to send_to[k], keep
//   self_weight * x_r, and add what arrives from recv_from (already scaled by the sender).
// recv_weights[k] = W[r][recv_from[k]]; send_weights[k] = W[send_to[k]][r]. Both lists are
// ascending and leave out links of weight exactly 0, so rank a lists b in send_to iff b lists
// a in recv_from: both ends agree on who talks.
struct RankMixing {
  double self_weight = 1.0;
  std::vector<int> recv_from;
  std::vector<double> recv_weights;
  std::vector<int> send_to;
  std::vector<double> send_weights;
};

RankMixing rank_mixing(const Graph& g, const TopologyConfig& config, int rank);
// The view of `rank` in round `round`; every rank calling this with the same (config, n, seed,
// round) sees a slice of the same W.
RankMixing rank_mixing(const TopologyConfig& config, int n, int rank, std::uint64_t seed,
                       std::int64_t round);

}  // namespace murmur::topology
