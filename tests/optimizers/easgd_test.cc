// easgd's arithmetic over inproc ranks: one round against a hand computation (gossip of the
// elastic variables, then the elastic step), the sum of p x + z kept over rounds with gradient
// steps in between, and the models held apart by less than a run without averaging drifts.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <mutex>

#include "core/config.h"
#include "device/device.h"
#include "tests/optimizers/consensus_util.h"
#include "tests/transport/backends.h"

namespace murmur::optimizers::testing {
namespace {

namespace tt = transport::testing;

struct Rank {
  std::vector<float> x, z;
};

// Rank r starts at x = r + i / 10 (entry i); before each round t, a "gradient step" adds
// drift(r, t) to every entry, different per rank so the models would drift apart alone.
std::vector<Rank> run(int n, int rounds, float beta, int local_steps, float (*drift)(int, int)) {
  std::vector<Rank> out(n);
  std::mutex m;
  auto body = [&](tt::RankContext& ctx) {
    const int r = ctx.rank();
    std::vector<float> x(8);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(r) + 0.1f * i;
    AlgorithmConfig a = algorithm("easgd");
    a.elastic_beta = beta;
    a.local_steps = local_steps;
    TransportConfig tc;
    tc.recv_timeout_ms = 20000;
    auto built = build_averaging(ctx.transport(), device::cpu(), a, graph("ring"), tc, x, 5);
    for (int t = 1; t <= rounds * local_steps; ++t) {
      for (float& v : x) v += drift(r, t);
      built.averaging->after_step(t);
    }
    built.averaging->finish();
    const auto state = built.averaging->state();
    REQUIRE(state.size() == 1);
    REQUIRE(state[0].first == "easgd.center");
    std::lock_guard lock(m);
    out[r] = {x, std::vector<float>(state[0].second.begin(), state[0].second.end())};
  };
  const std::string failures = tt::failures(tt::run_ranks("inproc", n, body));
  INFO(failures);
  REQUIRE(failures.empty());
  return out;
}

float no_drift(int, int) { return 0.0f; }
float spread(int r, int) { return 0.01f * static_cast<float>(r - 1); }

TEST_CASE("easgd: one round is the gossip of z, then the elastic step", "[easgd]") {
  // Ring of 4, uniform weights 1/3. z = x at the start, so after the gossip
  // z_r = (x_{r-1} + x_r + x_{r+1}) / 3; then d = x_r - z_r, x_r -= alpha d, z_r += beta d with
  // alpha = beta / 4.
  const float beta = 0.9f, alpha = beta / 4;
  const auto got = run(4, 1, beta, 1, no_drift);
  for (int r = 0; r < 4; ++r) {
    for (int i = 0; i < 8; ++i) {
      CAPTURE(r, i);
      auto x0 = [&](int q) { return static_cast<double>((q + 4) % 4) + 0.1 * i; };
      const double z = (x0(r - 1) + x0(r) + x0(r + 1)) / 3;
      const double d = x0(r) - z;
      CHECK(got[r].x[i] == Approx(x0(r) - alpha * d).margin(1e-6));
      CHECK(got[r].z[i] == Approx(z + beta * d).margin(1e-6));
    }
  }
}

TEST_CASE("easgd keeps the sum of p x + z and holds the drifting models together", "[easgd]") {
  const int rounds = 60;
  const auto got = run(4, rounds, 0.9f, 2, spread);
  const auto alone = run(4, rounds, 0.0f, 2, spread);  // beta 0: the models never meet
  for (int i = 0; i < 8; ++i) {
    CAPTURE(i);
    // Sum over ranks of 4 x + z: 5 sum x(0), plus 4 times the drift the steps added to x.
    double sum = 0, want = 0;
    for (int r = 0; r < 4; ++r) {
      sum += 4 * got[r].x[i] + got[r].z[i];
      want += 5 * (r + 0.1 * i) + 4 * rounds * 2 * static_cast<double>(spread(r, 0));
    }
    CHECK(sum == Approx(want).margin(1e-3));
  }
  // Apart by a bounded amount with the elastic force, by the drift's whole run without it.
  const double with = std::fabs(got[3].x[0] - got[0].x[0]);
  const double without = std::fabs(alone[3].x[0] - alone[0].x[0]);
  INFO(fmt::format("rank 3 - rank 0: {:.4g} with beta 0.9, {:.4g} with beta 0", with, without));
  CHECK(without == Approx(3 + 0.03 * rounds * 2).margin(1e-3));
  CHECK(with < 0.2 * without);
}

}  // namespace
}  // namespace murmur::optimizers::testing
