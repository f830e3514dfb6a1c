// Push-sum when the survivors of a death learn of it at different times (optimizers/sgp.h), over
// the inproc transport with live neighborhoods, no gradients: 4 ranks on the one-peer
// exponential graph; rank 2 stops at round kDeath, and ranks 0 and 3 mark it dead at once,
// while rank 1, whose out-neighbor it is every other round, learns of it only kLate rounds later.
// Until then rank 1 pushes half its mass to rank 2 every other round, and the bytes are taken as
// a dead process's socket buffer takes them over tcp. That mass is lost to all three: before the
// fix, every survivor's weight fell by about 0.85 per two rounds (to 0.02 within 50 rounds), and
// since the local optimizer steps z = x / w by lr / w, a run with gradients blew up (loss 10^5
// 50 steps after the death, 1 run in 12). Every survivor's weight must stay above a third, and
// the three must still reach one model inside the hull of the four starting ones.
#include <catch2/catch.hpp>

#include <barrier>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "membership/live_set.h"
#include "optimizers/device_arrays.h"
#include "optimizers/sgp.h"
#include "tests/optimizers/consensus_util.h"
#include "tests/time_scale.h"
#include "tests/transport/backends.h"
#include "topology/mixing.h"
#include "transport/tag.h"

namespace murmur::optimizers::testing {
namespace {

namespace tt = transport::testing;
using std::chrono::milliseconds;

constexpr int kRanks = 4, kDead = 2, kLateRank = 1;
constexpr std::size_t kDim = 256;
constexpr std::int64_t kDeath = 20, kLate = 60, kEnd = 400;

TEST_CASE("sgp keeps its weight when a survivor learns of a death late", "[consensus][faults]") {
  const TopologyConfig topology = graph("one_peer_exponential");
  const AlgorithmConfig algo = algorithm("sgp");
  const std::uint64_t seed = 7;
  std::vector<std::vector<float>> params(kRanks);
  for (int r = 0; r < kRanks; ++r) params[r] = initial_vector(seed, r, kDim);
  std::vector<float> lo(kDim, INFINITY), hi(kDim, -INFINITY);
  for (int r = 0; r < kRanks; ++r) {  // rank 2's model is in the mix of the first rounds
    for (std::size_t i = 0; i < kDim; ++i) {
      lo[i] = std::min(lo[i], params[r][i]);
      hi[i] = std::max(hi[i], params[r][i]);
    }
  }
  std::vector<std::unique_ptr<membership::LiveSet>> lives;
  for (int r = 0; r < kRanks; ++r) {
    lives.push_back(std::make_unique<membership::LiveSet>(kRanks, r, milliseconds(10000)));
  }
  std::vector<double> lowest_weight(kRanks, 1.0);
  std::vector<std::vector<float>> model(kRanks, std::vector<float>(kDim));
  std::barrier sync(kRanks);

  auto body = [&](tt::RankContext& ctx) {
    const int r = ctx.rank();
    TransportConfig tc;  // peer_timeout_ms: the default 10 s, longer than the whole test
    tc.recv_timeout_ms = murmur::testing::scaled_ms(30000);
    auto built = build_averaging(ctx.transport(), device::cpu(), algo, topology, tc, params[r],
                                 seed, lives[r].get());
    auto& sgp = dynamic_cast<Sgp&>(*built.averaging);
    std::int64_t step = 0;
    while (step < kDeath) sgp.after_step(++step);
    sync.arrive_and_wait();
    if (r == kDead) {
      // Gone, but its socket takes what rank 1 still pushes in the rounds it sends here
      // (round t is step t + 1; the message is n floats of x and one of w).
      std::vector<float> sink(kDim + 1);
      auto region = register_array(ctx.transport(), device::cpu(), sink);
      const transport::TagLayout layout(ctx.transport());
      for (std::int64_t t = kDeath; t < kLate; ++t) {
        const auto m = topology::rank_mixing(topology, kRanks, kLateRank, seed, t);
        if (m.send_to.empty() || m.send_to[0] != kDead) continue;
        auto q = ctx.transport().recv(kLateRank, layout.make(purpose_of(kSgp), t), *region,
                                      {0, sink.size() * sizeof(float)});
        MURMUR_CHECK(ctx.transport().wait(q, transport::deadline_after(milliseconds(
                                                 murmur::testing::scaled_ms(30000)))));
      }
      return;
    }
    if (r != kLateRank) lives[r]->mark_dead(kDead, "the test stops it");
    while (step < kEnd) {
      if (r == kLateRank && step == kLate) lives[r]->mark_dead(kDead, "learned late");
      sgp.after_step(++step);
      lowest_weight[r] = std::min(lowest_weight[r], sgp.weight());
    }
    sgp.flush();
    MURMUR_CHECK(sgp.debiased(model[r]));
  };
  tt::RunOptions options;
  options.timeout = milliseconds(60000);
  const auto failures = tt::failures(tt::run_ranks("inproc", kRanks, body, options));
  INFO(failures);
  REQUIRE(failures.empty());

  for (int r = 0; r < kRanks; ++r) {
    if (r == kDead) continue;
    CAPTURE(r);
    CHECK(lowest_weight[r] > 1.0 / 3);
    double apart = 0, outside = 0;
    for (std::size_t i = 0; i < kDim; ++i) {
      apart = std::max(apart, static_cast<double>(std::fabs(model[r][i] - model[0][i])));
      outside = std::max({outside, static_cast<double>(lo[i] - model[r][i]),
                          static_cast<double>(model[r][i] - hi[i])});
    }
    CHECK(apart < 1e-4);
    CHECK(outside < 1e-4);
  }
}

}  // namespace
}  // namespace murmur::optimizers::testing
