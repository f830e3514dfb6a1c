// CHOCO-SGD when a neighbor is lost and when it rejoins (optimizers/choco.h), over the inproc
// transport with live neighborhoods, no gradients: 4 ranks on a ring gossip top-10% differences;
// rank 3 goes silent and the others mark it dead; later it comes back as a restarted peer does
// (its neighbors' mean as its parameters, rejoined(), a join step on every side). The survivors
// must keep their mean and reach it (the lost neighbor's term leaves s); after the join all four
// must keep theirs and reach it, every copy of a public copy must be that copy bit for bit, and
// s must be sum_j W_ij x^_j again.
#include <catch2/catch.hpp>

#include <barrier>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "membership/live_set.h"
#include "tests/optimizers/consensus_util.h"
#include "tests/time_scale.h"
#include "tests/transport/backends.h"
#include "topology/mixing.h"

namespace murmur::optimizers::testing {
namespace {

namespace tt = transport::testing;
using std::chrono::milliseconds;

constexpr int kRanks = 4, kDead = 3;
constexpr std::size_t kDim = 1000;
constexpr int kBefore = 20, kAlone = 400, kJoinAhead = 10, kAfter = 600;

// The sum over `ranks` of their vectors, and the largest distance of one to their mean.
struct Spread {
  std::vector<double> sum;
  double widest = 0;
};
Spread spread(const std::vector<std::vector<float>>& x, const std::vector<int>& ranks) {
  Spread s;
  s.sum.assign(kDim, 0.0);
  for (int r : ranks) {
    for (std::size_t i = 0; i < kDim; ++i) s.sum[i] += x[r][i];
  }
  for (int r : ranks) {
    double d = 0;
    for (std::size_t i = 0; i < kDim; ++i) {
      const double e = x[r][i] - s.sum[i] / static_cast<double>(ranks.size());
      d += e * e;
    }
    s.widest = std::max(s.widest, std::sqrt(d));
  }
  return s;
}

double max_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST_CASE("choco drops a lost neighbor's term from s and swaps public copies when it rejoins",
          "[consensus][choco][faults]") {
  TopologyConfig topology = graph("ring");
  AlgorithmConfig algo = algorithm("choco");
  algo.compressor.name = "topk";
  algo.compressor.ratio = 0.1;
  algo.consensus_lr = 0.2;
  const std::uint64_t seed = 7;
  // Shared by the rank threads, read and written only between barriers.
  std::vector<std::vector<float>> params(kRanks);
  for (int r = 0; r < kRanks; ++r) params[r] = initial_vector(seed, r, kDim);
  std::vector<std::vector<float>> xhat(kRanks), s(kRanks);
  std::vector<std::map<int, std::vector<float>>> copies(kRanks);
  std::vector<std::string> out_while_alone(kRanks), out_at_end(kRanks);
  std::vector<std::vector<float>> after_drop, alone_end, before_join;
  std::string bad_list_refused;
  std::vector<std::unique_ptr<membership::LiveSet>> lives;
  for (int r = 0; r < kRanks; ++r) {
    lives.push_back(std::make_unique<membership::LiveSet>(kRanks, r, milliseconds(10000)));
  }
  std::barrier sync(kRanks);
  const std::int64_t join = kBefore + kAlone + kJoinAhead;

  auto body = [&](tt::RankContext& ctx) {
    const int r = ctx.rank();
    TransportConfig tc;
    tc.recv_timeout_ms = murmur::testing::scaled_ms(30000);
    auto built = build_averaging(ctx.transport(), device::cpu(), algo, topology, tc, params[r],
                                 seed, lives[r].get());
    Averaging& choco = *built.averaging;
    std::int64_t step = 0;
    while (step < kBefore) choco.after_step(++step);
    sync.arrive_and_wait();
    if (r != kDead) lives[r]->mark_dead(kDead, "the test stops it");
    if (r == 0) after_drop = params;
    sync.arrive_and_wait();
    if (r != kDead) {
      while (step < kBefore + kAlone) choco.after_step(++step);
      out_while_alone[r] = choco.scalars().at("choco.out");
    }
    step = kBefore + kAlone;
    sync.arrive_and_wait();
    if (r == 0) alone_end = params;
    sync.arrive_and_wait();
    // Local steps move the survivors apart again (they have reached their mean by now), so
    // that the four have a spread to close after the join.
    if (r != kDead) {
      const auto push = initial_vector(seed + 1, r, kDim);
      for (std::size_t i = 0; i < kDim; ++i) params[r][i] += push[i];
    }
    sync.arrive_and_wait();
    if (r == kDead) {
      // As membership::rejoin() leaves a restarted peer: its neighbors' mean, each of them
      // taken back from the join step.
      for (std::size_t i = 0; i < kDim; ++i) params[r][i] = 0.5f * (params[0][i] + params[2][i]);
      for (int q = 0; q < kRanks; ++q) {
        if (q == r) continue;
        lives[r]->mark_dead(q, "restarted");
        lives[r]->revive(q, join);
      }
      choco.rejoined();
    } else {
      lives[r]->revive(kDead, join);
    }
    sync.arrive_and_wait();
    if (r == 0) before_join = params;
    sync.arrive_and_wait();
    while (step < join + kAfter) choco.after_step(++step);
    out_at_end[r] = choco.scalars().at("choco.out");
    for (auto& [name, data] : choco.state()) {
      std::vector<float> v(data.begin(), data.end());
      if (name == "choco.xhat") xhat[r] = v;
      else if (name == "choco.s") s[r] = v;
      else copies[r][std::stoi(name.substr(std::string("choco.copy.").size()))] = v;
    }
    if (r == 0) {
      try {
        choco.restore_scalars({{"choco.out", "2"}});  // rank 2 is no in-neighbor of rank 0
      } catch (const CheckpointError& e) {
        bad_list_refused = e.what();
      }
    }
  };
  tt::RunOptions options;
  options.timeout = std::chrono::seconds(100);
  REQUIRE(tt::failures(tt::run_ranks("inproc", kRanks, body, options)).empty());

  // Alone, the three survivors keep their mean (their W stayed doubly stochastic) and reach it.
  const std::vector<int> survivors{0, 1, 2}, everyone{0, 1, 2, 3};
  for (int r : survivors) CHECK(out_while_alone[r] == (r == 1 ? "" : "3"));
  const Spread dropped = spread(after_drop, survivors), alone = spread(alone_end, survivors);
  INFO(fmt::format("survivors: spread {:.3g} -> {:.3g}, mean moved {:.3g}", dropped.widest,
                   alone.widest, max_difference(dropped.sum, alone.sum)));
  CHECK(max_difference(dropped.sum, alone.sum) < 1e-3);
  CHECK(alone.widest < 1e-2 * dropped.widest);

  // Rejoined, the four keep their mean and reach it.
  const Spread joined = spread(before_join, everyone), end = spread(params, everyone);
  INFO(fmt::format("all four: spread {:.3g} -> {:.3g}, mean moved {:.3g}", joined.widest,
                   end.widest, max_difference(joined.sum, end.sum)));
  CHECK(max_difference(joined.sum, end.sum) < 1e-3);
  CHECK(end.widest < 1e-2 * joined.widest);

  // Every rank's copy of a neighbor's public copy is that copy, and s_i = sum_j W_ij x^_j.
  for (int r : everyone) {
    CAPTURE(r);
    CHECK(out_at_end[r].empty());
    const auto m = topology::rank_mixing(topology, kRanks, r, seed, 0);
    REQUIRE(copies[r].size() == m.recv_from.size());
    std::vector<double> expect(kDim);
    for (std::size_t i = 0; i < kDim; ++i) expect[i] = m.self_weight * xhat[r][i];
    for (std::size_t k = 0; k < m.recv_from.size(); ++k) {
      const int q = m.recv_from[k];
      CAPTURE(q);
      CHECK(copies[r][q] == xhat[q]);
      for (std::size_t i = 0; i < kDim; ++i) expect[i] += m.recv_weights[k] * xhat[q][i];
    }
    double worst = 0;
    for (std::size_t i = 0; i < kDim; ++i) worst = std::max(worst, std::fabs(s[r][i] - expect[i]));
    CHECK(worst < 1e-4);
  }
  CHECK_THAT(bad_list_refused, Catch::Contains("choco.out"));
}

}  // namespace
}  // namespace murmur::optimizers::testing
