// GossipGraD's diffusion test (Daily et al. 2018): a one-hot tracer parameter on one peer reaches
// every peer within ceil(log2 P) rounds of a one-partner schedule, through the real D-PSGD
// exchange over inproc ranks. Each round at most doubles the peers that hold it, so ceil(log2 P)
// is also the least; on gossipgrad's relabelled hypercube the tracer is then exactly 1 / P
// everywhere (the period's matchings multiply to the exact average).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <mutex>

#include "device/device.h"
#include "tests/optimizers/consensus_util.h"
#include "tests/time_scale.h"
#include "tests/transport/backends.h"

namespace murmur::optimizers::testing {
namespace {

namespace tt = transport::testing;

int ceil_log2(int n) {
  int t = 0;
  while ((1 << t) < n) ++t;
  return t;
}

struct Diffusion {
  std::vector<int> reached;       // per peer: the first round after which it held the tracer
  std::vector<float> final_value;  // per peer: the tracer after the last round
};

// Rank `source` starts with 1 in entry 0, everyone else with 0; the other entries are noise
// that must not disturb it. Runs `rounds` D-PSGD rounds from round 0.
Diffusion trace(const std::string& graph_name, int n, int source, int rounds, std::uint64_t seed) {
  Diffusion d;
  d.reached.assign(n, -1);
  d.final_value.assign(n, 0.0f);
  std::mutex m;
  auto body = [&](tt::RankContext& ctx) {
    const int r = ctx.rank();
    std::vector<float> params = initial_vector(seed, r, 64);
    params[0] = r == source ? 1.0f : 0.0f;
    TransportConfig tc;
    tc.recv_timeout_ms = murmur::testing::scaled_ms(30000);
    TopologyConfig topology = graph(graph_name);
    auto built = build_averaging(ctx.transport(), device::cpu(), algorithm("dpsgd"), topology, tc,
                                 params, seed);
    int reached = r == source ? 0 : -1;
    for (int t = 1; t <= rounds; ++t) {
      built.averaging->after_step(t);
      if (reached < 0 && params[0] != 0.0f) reached = t;
    }
    built.averaging->finish();
    std::lock_guard lock(m);
    d.reached[r] = reached;
    d.final_value[r] = params[0];
  };
  tt::RunOptions options;
  options.timeout = std::chrono::seconds(60);
  const std::string failures = tt::failures(tt::run_ranks("inproc", n, body, options));
  INFO(failures);
  REQUIRE(failures.empty());
  return d;
}

TEST_CASE("diffusion: a tracer on one peer reaches every peer within ceil(log2 P) rounds",
          "[diffusion]") {
  struct Case {
    const char* graph;
    int peers;
  };
  const Case c = GENERATE(Case{"gossipgrad", 8}, Case{"gossipgrad", 16}, Case{"gossipgrad", 64},
                          Case{"one_peer_exponential", 6}, Case{"one_peer_exponential", 12},
                          Case{"one_peer_exponential", 16});
  const int source = c.peers / 3;
  const int bound = ceil_log2(c.peers);
  CAPTURE(c.graph, c.peers, source, bound);
  for (const std::uint64_t seed : {7u, 8u}) {
    CAPTURE(seed);
    const Diffusion d = trace(c.graph, c.peers, source, bound, seed);
    int last = 0;
    for (int r = 0; r < c.peers; ++r) {
      INFO(fmt::format("peer {} first held the tracer after round {}, value {}", r, d.reached[r],
                       d.final_value[r]));
      REQUIRE(d.reached[r] >= 0);
      REQUIRE(d.reached[r] <= bound);
      last = std::max(last, d.reached[r]);
      // The exact average where the rounds of a period multiply to it (P a power of 2).
      if ((c.peers & (c.peers - 1)) == 0) CHECK(d.final_value[r] == Approx(1.0 / c.peers));
    }
    CHECK(last == bound);  // one partner per round: the holders at most double each round
  }
}

TEST_CASE("diffusion: a static ring needs P / 2 rounds, where gossipgrad needs log2 P",
          "[diffusion]") {
  // The contrast the test exists for: the same tracer on a ring of 16 is still missing from
  // the far side after log2 16 = 4 rounds.
  const Diffusion d = trace("ring", 16, 0, 4, 7);
  int missing = 0;
  for (int r = 0; r < 16; ++r) missing += d.reached[r] < 0;
  CHECK(missing == 16 - 9);  // ranks within 4 hops either way hold it: 0, 1..4, 12..15
}

}  // namespace
}  // namespace murmur::optimizers::testing
