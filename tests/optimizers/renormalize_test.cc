// The mixing weights renormalized over the neighbors that take part (optimizers/mixing_schedule.h),
// asked of a live Neighborhood: they must keep the sums each algorithm relies on (rows of W for
// D-PSGD, columns for push-sum) and W symmetric where it was.
#include <catch2/catch.hpp>

#include <chrono>
#include <vector>

#include "core/config.h"
#include "membership/live_set.h"
#include "membership/neighborhood.h"
#include "optimizers/mixing_schedule.h"
#include "topology/mixing.h"
#include "transport/inproc/transport.h"

namespace murmur::optimizers {
namespace {

using membership::LiveSet;
using std::chrono::milliseconds;

// A live neighborhood over `live`; only its view of who takes part is asked here.
struct LiveView {
  explicit LiveView(LiveSet& live)
      : transports(transport::inproc::make_world(live.world_size())),
        hood(membership::live_neighborhood(*transports[0], live, {}, transport::host_float_ops())) {}
  std::vector<std::unique_ptr<transport::Transport>> transports;
  std::unique_ptr<membership::Neighborhood> hood;
};

// The full matrix W of a world, rebuilt from every rank's renormalized view.
std::vector<std::vector<double>> renormalized_matrix(const TopologyConfig& topo, int n,
                                                     const membership::Neighborhood& view_of_all,
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
  LiveView view(live);
  const auto w = renormalized_matrix(topo, n, *view.hood, Renormalize::kRow);
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
  LiveView view(live);
  for (int i = 0; i < n; ++i) {
    if (i == 3) continue;
    const auto m = renormalize(topology::rank_mixing(topo, n, i, 7, 0), *view.hood, 0,
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
