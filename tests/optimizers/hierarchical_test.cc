// Hierarchical averaging (optimizers/hierarchical.h) on inproc ranks: the three phases' arithmetic
// against the formula, bitwise the same model on every rank of a node (and of the world with
// allreduce), only leaders sending between nodes, and the configs it refuses.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <mutex>

#include "core/error.h"
#include "optimizers/algorithm.h"
#include "optimizers/hierarchical.h"
#include "tests/optimizers/consensus_util.h"
#include "tests/transport/backends.h"
#include "transport/inproc/transport.h"

namespace murmur::optimizers::testing {
namespace {

namespace tt = transport::testing;

constexpr std::size_t kDim = 257;  // not a multiple of any chunking

// Every rank's model after one hierarchical round on `n` ranks in nodes of `per_node`, and the
// bytes each rank sent during it.
struct Round {
  std::vector<std::vector<float>> models;
  std::vector<std::uint64_t> sent;
};

Round one_round(const std::string& name, const std::string& g, int n, int per_node) {
  AlgorithmConfig alg = algorithm(name);
  alg.hierarchical = true;
  TopologyConfig topo = graph(g);
  Round out;
  out.models.resize(n);
  out.sent.resize(n);
  std::mutex mu;
  auto results = tt::run_ranks("inproc", n, [&](tt::RankContext& ctx) {
    std::vector<float> params = initial_vector(11, ctx.rank(), kDim);
    TransportConfig tc;
    tc.recv_timeout_ms = 20000;
    auto built = build_averaging(ctx.transport(), device::cpu(), alg, topo, tc, params, 7, nullptr, per_node);
    const std::uint64_t before = ctx.transport().bytes_sent();
    built.averaging->after_step(1);
    std::lock_guard lock(mu);
    out.sent[ctx.rank()] = ctx.transport().bytes_sent() - before;
    out.models[ctx.rank()] = params;
  });
  INFO(tt::failures(results));
  REQUIRE(tt::failures(results).empty());
  return out;
}

// The exact average of node i's initial vectors.
std::vector<double> node_mean(int node, int per_node) {
  std::vector<double> m(kDim, 0.0);
  for (int r = node * per_node; r < (node + 1) * per_node; ++r) {
    const auto x = initial_vector(11, r, kDim);
    for (std::size_t i = 0; i < kDim; ++i) m[i] += x[i] / per_node;
  }
  return m;
}

TEST_CASE("hierarchical dpsgd: node averages, then D-PSGD over the ring of nodes", "[hierarchical]") {
  const int nodes = 4, per_node = 2;
  const Round got = one_round("dpsgd", "ring", nodes * per_node, per_node);
  for (int node = 0; node < nodes; ++node) {
    // Ring of 4 nodes, uniform weights: node i <- (a_{i-1} + a_i + a_{i+1}) / 3.
    const auto left = node_mean((node + nodes - 1) % nodes, per_node), self = node_mean(node, per_node),
               right = node_mean((node + 1) % nodes, per_node);
    double worst = 0;
    for (std::size_t i = 0; i < kDim; ++i) {
      const double want = (left[i] + self[i] + right[i]) / 3;
      worst = std::max(worst, std::fabs(got.models[node * per_node][i] - want));
    }
    INFO("node " << node);
    CHECK(worst < 1e-5);
    for (int r = node * per_node + 1; r < (node + 1) * per_node; ++r) CHECK(got.models[r] == got.models[node * per_node]);
  }
}

TEST_CASE("hierarchical allreduce: the exact mean, bitwise the same everywhere", "[hierarchical]") {
  for (auto [n, per_node] : {std::pair{6, 3}, std::pair{8, 2}, std::pair{4, 4}, std::pair{3, 1}}) {
    INFO(n << " ranks, " << per_node << " per node");
    const Round got = one_round("allreduce", "ring", n, per_node);
    std::vector<double> mean(kDim, 0.0);
    for (int r = 0; r < n; ++r) {
      const auto x = initial_vector(11, r, kDim);
      for (std::size_t i = 0; i < kDim; ++i) mean[i] += static_cast<double>(x[i]) / n;
    }
    double worst = 0;
    for (std::size_t i = 0; i < kDim; ++i) worst = std::max(worst, std::fabs(got.models[0][i] - mean[i]));
    CHECK(worst < 1e-5);
    for (int r = 1; r < n; ++r) CHECK(got.models[r] == got.models[0]);
  }
}

TEST_CASE("hierarchical: only a node's leader sends beyond its node", "[hierarchical]") {
  // 3 nodes of 3: a member sends its share of the node's allreduce, never a whole model more; a
  // leader also sends to its two neighbor nodes and shares the result with its 2 members.
  const int per_node = 3;
  const Round got = one_round("dpsgd", "ring", 9, per_node);
  const std::uint64_t model = kDim * sizeof(float);
  for (int r = 0; r < 9; ++r) {
    INFO("rank " << r);
    if (r % per_node == 0) {
      CHECK(got.sent[r] >= 4 * model);  // 2 neighbor nodes + 2 members
    } else {
      CHECK(got.sent[r] < model * 2);   // the ring within the node: 2(k-1)/k of a model
    }
  }
}

TEST_CASE("hierarchical: refused where it cannot run", "[hierarchical]") {
  auto transports = transport::inproc::make_world(6);  // only rank 0 is used: nothing is sent
  std::vector<float> params(10, 0.0f);
  auto region = transports[0]->register_region(std::as_writable_bytes(std::span(params)));
  TransportConfig tc;
  auto hood = membership::strict_neighborhood(*transports[0], {}, transport::host_float_ops());
  auto build = [&](const std::string& name, bool overlap, int per_node, const std::string& g = "ring") {
    AlgorithmConfig alg = algorithm(name);
    alg.hierarchical = true;
    alg.overlap = overlap;
    TopologyConfig topo = graph(g);
    AveragingContext ctx{alg, topo, tc, *hood, device::cpu(), params, *region, 1};
    ctx.ranks_per_node = per_node;
    return make_averaging(ctx);
  };
  CHECK_THROWS_WITH(build("sgp", false, 2), Catch::Contains("dpsgd and allreduce average hierarchically, not sgp"));
  CHECK_THROWS_WITH(build("dpsgd", true, 2), Catch::Contains("not with algorithm.overlap"));
  CHECK_THROWS_WITH(build("dpsgd", false, 4), Catch::Contains("6 ranks do not make nodes of 4"));
  // 3 nodes: a graph of nodes that no doubly stochastic weights fit is refused for 3, not 6.
  CHECK_THROWS_AS(build("dpsgd", false, 2, "random_kout"), ConfigError);
  CHECK_NOTHROW(build("dpsgd", false, 2));
  CHECK_NOTHROW(build("allreduce", false, 3));
  CHECK_NOTHROW(build("dpsgd", false, 6));  // one node: no graph at all
}

}  // namespace
}  // namespace murmur::optimizers::testing
