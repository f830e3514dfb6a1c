// D-PSGD with bounded staleness (optimizers/bounded_staleness.h, algorithm.max_staleness): no
// peer's round t ends before each in-neighbor has begun round t - s, a fast peer does run ahead
// of a slow one up to that bound, the ages it counts stay within it, and the peers still reach
// consensus. Over inproc threads, with one rank made slow by a pause before each of its steps;
// the config checks refuse what the option cannot do.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "optimizers/algorithm.h"
#include "tests/optimizers/consensus_util.h"
#include "tests/transport/backends.h"
#include "topology/mixing.h"
#include "transport/factory.h"

namespace murmur::optimizers::testing {
namespace {

namespace tt = transport::testing;

struct StaleEnd {
  std::vector<float> params;
  ExchangeReport report;
  std::int64_t most_ahead = 0;  // the most rounds this rank finished ahead of a neighbor's start
  std::int64_t over_bound = 0;  // rounds that ended with a neighbor more than s rounds behind
};

struct StaleRun {
  std::string backend = "inproc";
  int ranks = 4;
  int s = 3;
  int steps = 60;
  int slow_rank = 1;
  std::chrono::microseconds slow_pause{4000}, pause{0};
};

// Each rank counts the step it has begun (before after_step(t), which sends round t first) and,
// when after_step(t) returns, compares with the counts of its in-neighbors on the ring.
std::vector<StaleEnd> run_stale(const StaleRun& run, std::string& failures) {
  const std::size_t dim = 256;
  std::vector<StaleEnd> ends(run.ranks);
  std::vector<std::atomic<std::int64_t>> begun(run.ranks);
  for (auto& b : begun) b = 0;
  std::mutex mu;
  AlgorithmConfig a = algorithm("dpsgd");
  a.max_staleness = run.s;
  const TopologyConfig ring = graph("ring");
  auto body = [&](tt::RankContext& ctx) {
    const int r = ctx.rank();
    std::vector<float> params = initial_vector(7, r, dim);
    TransportConfig tc;
    tc.recv_timeout_ms = 20000;
    auto built = build_averaging(ctx.transport(), device::cpu(), a, ring, tc, params, 7);
    const auto neighbors = topology::rank_mixing(ring, run.ranks, r, 7, 0).recv_from;
    StaleEnd end;
    for (int t = 1; t <= run.steps; ++t) {
      std::this_thread::sleep_for(r == run.slow_rank ? run.slow_pause : run.pause);
      begun[r] = t;
      built.averaging->after_step(t);
      for (int j : neighbors) {
        const std::int64_t ahead = t - begun[j].load();
        end.most_ahead = std::max(end.most_ahead, ahead);
        if (ahead > run.s) ++end.over_bound;
      }
    }
    built.averaging->finish();
    const auto report = built.averaging->exchange_report();
    MURMUR_CHECK(report.has_value());
    end.params = params;
    end.report = *report;
    std::lock_guard lock(mu);
    ends[r] = end;
  };
  tt::RunOptions options;
  options.timeout = std::chrono::seconds(100);
  options.configure = [](TransportConfig&, int) {
    ::setenv("UCX_TLS", "tcp,self", 1);  // loopback for UCX (children only: after the fork)
    ::setenv("UCX_NET_DEVICES", "lo", 1);
  };
  if (run.backend == "inproc") {
    failures = tt::failures(tt::run_ranks(run.backend, run.ranks, body));
  } else {
    failures = tt::failures(tt::run_ranks(run.backend, run.ranks, body, options));
  }
  return ends;
}

std::size_t oldest_age(const ExchangeReport& r) {
  std::size_t a = 0;
  for (std::size_t i = 0; i < r.staleness.size(); ++i) {
    if (r.staleness[i] > 0) a = i;
  }
  return a;
}

double spread(const std::vector<StaleEnd>& ends) {
  double d = 0;
  for (const auto& e : ends) {
    for (std::size_t i = 0; i < e.params.size(); ++i) {
      d = std::max<double>(d, std::fabs(e.params[i] - ends[0].params[i]));
    }
  }
  return d;
}

TEST_CASE("dpsgd max_staleness: a peer runs at most s rounds ahead of a neighbor, and does run "
          "ahead", "[staleness]") {
  // Rank 1 sleeps 4 ms before each step, the others not at all: in lockstep they would end each
  // round with rank 1 at most one round behind; with s = 3 they run ahead up to 3 rounds and
  // wait only there. Rank 3, two hops away, is held back through ranks 0 and 2.
  StaleRun run;
  std::string failures;
  const auto ends = run_stale(run, failures);
  INFO(failures);
  REQUIRE(failures.empty());
  for (int r = 0; r < run.ranks; ++r) {
    CAPTURE(r, ends[r].most_ahead);
    CHECK(ends[r].over_bound == 0);
    CHECK(oldest_age(ends[r].report) <= static_cast<std::size_t>(run.s));
    // One use per neighbor and round, but for the first rounds before a neighbor is heard.
    CHECK(ends[r].report.exchanges <= 2u * run.steps);
    CHECK(ends[r].report.exchanges >= 2u * (run.steps - run.s));
    CHECK(ends[r].report.lost == 0);
  }
  // The slow rank's neighbors ran ahead to the bound, and used its models s rounds old.
  for (int r : {0, 2}) {
    CAPTURE(r);
    CHECK(ends[r].most_ahead == run.s);
    CHECK(oldest_age(ends[r].report) == static_cast<std::size_t>(run.s));
  }
  // The peers still agree: 60 rounds of a ring of 4, then nothing in flight.
  CHECK(spread(ends) < 1e-2);
}

TEST_CASE("dpsgd max_staleness: the peers reach consensus, over every process backend",
          "[staleness][multiproc]") {
  const auto backend = GENERATE(from_range(transport::process_backends()));
  CAPTURE(backend);
  StaleRun run;
  run.backend = backend;
  run.s = 2;
  run.steps = 150;
  run.slow_pause = std::chrono::microseconds(3000);
  run.pause = std::chrono::microseconds(300);
  std::string failures;
  const auto ends = run_stale(run, failures);
  INFO(failures);
  REQUIRE(failures.empty());
  for (int r = 0; r < run.ranks; ++r) {
    CHECK(ends[r].over_bound == 0);
    CHECK(oldest_age(ends[r].report) <= 2u);
  }
  // Each rank started from its own standard normal vector; 150 rounds leave them together.
  CHECK(spread(ends) < 1e-4);
}

TEST_CASE("dpsgd max_staleness: what it cannot do is refused, naming the key", "[staleness]") {
  const auto refused = [](AlgorithmConfig a, const std::string& g) {
    try {
      check_algorithm(a, graph(g), 8, 7);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  AlgorithmConfig a = algorithm("dpsgd");
  a.max_staleness = 4;
  CHECK(refused(a, "ring") == "accepted");
  CHECK_THAT(refused(a, "one_peer_exponential"), Catch::Contains("needs a static graph"));
  AlgorithmConfig overlapped = a;
  overlapped.overlap = true;
  CHECK_THAT(refused(overlapped, "ring"), Catch::Contains("not with algorithm.overlap"));
  AlgorithmConfig push = a;
  push.name = "sgp";
  CHECK_THAT(refused(push, "random_kout"), Catch::Contains("dpsgd's, not sgp's"));
  // A restarted peer is not taken back under bounded staleness.
  CHECK(rejoin_policy(a) == RejoinPolicy::kNone);
  CHECK(rejoin_policy(algorithm("dpsgd")) == RejoinPolicy::kPerPair);
}

}  // namespace
}  // namespace murmur::optimizers::testing
