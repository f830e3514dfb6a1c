#include "topology/mixing.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include <fmt/format.h>

#include "core/error.h"
#include "topology/schedule.h"

namespace murmur::topology {
namespace {

// Weights of one graph under one scheme, entry by entry, so rank_mixing needs only O(degree)
// entries of W instead of building all n^2.
class Weights {
 public:
  Weights(const Graph& g, const TopologyConfig& c) : g_(g), c_(c), deg_(g.n) {
    for (int i = 0; i < g.n; ++i) deg_[i] = static_cast<int>(g.out[i].size());
    if (c.weights == "metropolis" && g.directed) {
      throw ConfigError("topology.weights: metropolis needs an undirected graph");
    }
    if (c.weights == "custom") check_custom();
    else if (c.weights != "uniform" && c.weights != "metropolis") {
      throw ConfigError(fmt::format("topology.weights: unknown scheme '{}'", c.weights));
    }
  }

  // W_ij for an edge j -> i, i != j.
  double off(int i, int j) const {
    if (c_.weights == "custom") return c_.matrix[i][j];
    if (c_.weights == "metropolis") return 1.0 / (1 + std::max(deg_[i], deg_[j]));
    return g_.directed ? 1.0 / (deg_[j] + 1) : 1.0 / (deg_[i] + 1);
  }

  double self(int i) const {
    if (c_.weights == "custom") return c_.matrix[i][i];
    if (c_.weights == "metropolis") {
      double rest = 1.0;
      for (int j : g_.out[i]) rest -= off(i, j);  // undirected: out-neighbors are in-neighbors
      return rest;
    }
    return 1.0 / (deg_[i] + 1);
  }

 private:
  void check_custom() const {
    const int n = g_.n;
    if (static_cast<int>(c_.matrix.size()) != n) {
      throw ConfigError(fmt::format("topology.matrix: {} rows for {} peers", c_.matrix.size(), n));
    }
    for (int i = 0; i < n; ++i) {
      if (static_cast<int>(c_.matrix[i].size()) != n) {
        throw ConfigError(fmt::format("topology.matrix: row {} has {} entries (must be {})", i,
                                      c_.matrix[i].size(), n));
      }
      for (int j = 0; j < n; ++j) {
        const double v = c_.matrix[i][j];
        if (!std::isfinite(v)) {
          throw ConfigError(fmt::format("topology.matrix[{}][{}] = {} is not finite", i, j, v));
        }
        if (i != j && v != 0.0 && !has_edge(g_, j, i)) {
          throw ConfigError(fmt::format(
              "topology.matrix[{}][{}] = {} but rank {} does not send to rank {} in the graph "
              "(W[i][j] is the weight rank i gives to what it receives from j)",
              i, j, v, j, i));
        }
      }
    }
  }

  const Graph& g_;
  const TopologyConfig& c_;
  std::vector<int> deg_;
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

}  // namespace murmur::topology
