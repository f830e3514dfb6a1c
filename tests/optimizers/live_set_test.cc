// The pieces of fault tolerance that need no process to die: the live set's bookkeeping and the
// mixing weights renormalized over the live neighbors, which must keep the sums each algorithm
// relies on (rows of W for D-PSGD, columns for push-sum) and W symmetric where it was.
#include <catch2/catch.hpp>

#include <chrono>
#include <vector>

#include "core/config.h"
#include "optimizers/live_set.h"
#include "topology/mixing.h"

namespace murmur::optimizers {
namespace {

using std::chrono::milliseconds;

TEST_CASE("a live set marks deaths once and takes a rank back from an agreed step", "[faults]") {
  LiveSet live(4, 1, milliseconds(100));
  CHECK(live.live_ranks(0) == std::vector<int>{0, 1, 2, 3});
  live.mark_dead(2, "test");
  const auto v = live.version();
  live.mark_dead(2, "again");  // idempotent
  CHECK(live.version() == v);
  live.mark_dead(1, "self");  // never itself
  CHECK(live.alive(1, 5));
  CHECK(live.dead(2));
  CHECK_FALSE(live.alive(2, 1000000));
  CHECK(live.live_ranks(7) == std::vector<int>{0, 1, 3});
  live.revive(2, 10);
  CHECK_FALSE(live.dead(2));
  CHECK_FALSE(live.alive(2, 9));
  CHECK(live.alive(2, 10));
  CHECK(live.dead_ranks().empty());
  CHECK(live.next_agreement() == 0);
  CHECK(live.next_agreement() == 1);
  CHECK(live.agreements() == 2);
}

// The full matrix W of a world, rebuilt from every rank's renormalized view.
std::vector<std::vector<double>> renormalized_matrix(const TopologyConfig& topo, int n,
                                                     const LiveSet& view_of_all,
                                                     Renormalize how) {
  std::vector<std::vector<double>> w(n, std::vector<double>(n, 0.0));
  for (int i = 0; i < n; ++i) {
    if (!view_of_all.alive(i, 0)) continue;
    const auto m = renormalize(topology::rank_mixing(topo, n, i, 7, 0), view_of_all, 0, how);
    w[i][i] = m.self_weight;
    for (std::size_t k = 0; k < m.recv_from.size(); ++k) w[i][m.recv_from[k]] = m.recv_weights[k];
    if (how == Renormalize::kColumn) {
      // Push weights are W_ji on the sender's side: column i.
      for (std::size_t k = 0; k < m.send_to.size(); ++k) w[m.send_to[k]][i] = m.send_weights[k];
    }
  }
  return w;
}

// On a directed graph (exponential) only the rows can be kept (no rank knows the others' rows):
// every model stays a convex combination, and the mean may drift (sgp is for directed graphs).
TEST_CASE("renormalized D-PSGD weights stay symmetric and doubly stochastic over the live ranks",
          "[faults]") {
  const std::string graph = GENERATE("ring", "torus", "complete", "exponential");
  const bool undirected = graph != "exponential";
  CAPTURE(graph);
  TopologyConfig topo;
  topo.graph = graph;
  topo.weights = undirected ? GENERATE("uniform", "metropolis") : "uniform";
  const int n = 9;
  LiveSet live(n, 0, milliseconds(100));
  live.mark_dead(4, "test");
  live.mark_dead(5, "test");
  const auto w = renormalized_matrix(topo, n, live, Renormalize::kRow);
  for (int i = 0; i < n; ++i) {
    if (i == 4 || i == 5) continue;
    double row = 0, col = 0;
    for (int j = 0; j < n; ++j) {
      row += w[i][j];
      col += w[j][i];
      if (undirected) CHECK(w[i][j] == Approx(w[j][i]).margin(1e-12));
      if (j == 4 || j == 5) CHECK(w[i][j] == 0.0);
    }
    CHECK(row == Approx(1.0).margin(1e-12));
    if (undirected) CHECK(col == Approx(1.0).margin(1e-12));
  }
}

TEST_CASE("renormalized push weights keep every live sender's column summing to 1", "[faults]") {
  TopologyConfig topo;
  topo.graph = GENERATE("ring_directed", "exponential");
  CAPTURE(topo.graph);
  const int n = 8;
  LiveSet live(n, 0, milliseconds(100));
  live.mark_dead(3, "test");
  for (int i = 0; i < n; ++i) {
    if (i == 3) continue;
    const auto m = renormalize(topology::rank_mixing(topo, n, i, 7, 0), live, 0,
                               Renormalize::kColumn);
    double column = m.self_weight;
    for (double x : m.send_weights) column += x;
    CHECK(column == Approx(1.0).margin(1e-12));
    for (int j : m.send_to) CHECK(j != 3);
    for (int j : m.recv_from) CHECK(j != 3);
  }
}

}  // namespace
}  // namespace murmur::optimizers
