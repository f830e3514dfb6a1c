// LARS against a double-precision reference of You et al.'s update, written out here per tensor,
// and the property that makes it LARS: a weight tensor's step does not depend on its gradient's
// scale, so one layer's large gradient cannot blow it up when the lr grows with the batch.
#include "optimizers/lars.h"

#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "core/arena.h"
#include "core/error.h"
#include "device/device.h"

using murmur::ArenaEntry;
using murmur::OptimizerConfig;
using murmur::optimizers::Lars;
using murmur::optimizers::make_local_optimizer;

namespace {

// A 2x3 weight at float 0 and a bias of 2 at float 64 (an arena's alignment), padding between.
std::vector<ArenaEntry> layout() {
  return {{"fc.weight", {2, 3}, 0, 6}, {"fc.bias", {2}, 64, 2}};
}
constexpr std::size_t kSize = 128;

OptimizerConfig lars_config(double momentum, double wd, double eta) {
  OptimizerConfig c;
  c.name = "lars";
  c.momentum = momentum;
  c.weight_decay = wd;
  c.trust_coefficient = eta;
  return c;
}

std::vector<float> start_params() {
  std::vector<float> p(kSize, 0.0f);
  const float w[6] = {0.5f, -1.25f, 2.0f, -0.75f, 0.125f, 1.0f};
  for (int i = 0; i < 6; ++i) p[i] = w[i];
  p[64] = 0.3f;
  p[65] = -0.2f;
  return p;
}

// The gradient of step t: any fixed function of p and t will do.
std::vector<float> gradient(const std::vector<float>& p, int t, float scale = 1.0f) {
  std::vector<float> g(kSize, 0.0f);
  for (int i = 0; i < 6; ++i) g[i] = scale * (0.7f * p[i] + 0.1f * static_cast<float>(i - t));
  g[64] = scale * (p[64] - 0.05f);
  g[65] = scale * 0.4f;
  return g;
}

// You et al.'s Algorithm 1 with torch's momentum convention, in double.
std::vector<double> reference(int steps, double lr, double mu, double wd, double eta) {
  std::vector<float> pf = start_params();
  std::vector<double> p(pf.begin(), pf.end()), b(kSize, 0.0);
  for (int t = 0; t < steps; ++t) {
    std::vector<float> cur(p.begin(), p.end());
    const std::vector<float> gf = gradient(cur, t);
    std::vector<double> d(kSize, 0.0);
    for (const ArenaEntry& e : layout()) {
      double wn = 0, gn = 0;
      for (std::size_t i = e.offset; i < e.offset + e.numel; ++i) {
        wn += p[i] * p[i];
        gn += static_cast<double>(gf[i]) * gf[i];
      }
      wn = std::sqrt(wn);
      gn = std::sqrt(gn);
      const double trust = e.shape.size() > 1 ? eta * wn / (gn + wd * wn) : 1.0;
      for (std::size_t i = e.offset; i < e.offset + e.numel; ++i)
        d[i] = trust * (gf[i] + wd * p[i]);
    }
    for (std::size_t i = 0; i < kSize; ++i) {
      b[i] = t == 0 ? d[i] : mu * b[i] + d[i];
      p[i] -= lr * b[i];
    }
  }
  return p;
}

std::vector<float> run(murmur::optimizers::LocalOptimizer& opt, int steps, float lr,
                       float grad_scale = 1.0f) {
  std::vector<float> p = start_params();
  for (int t = 0; t < steps; ++t) opt.step(p, gradient(p, t, grad_scale), lr);
  return p;
}

}  // namespace

TEST_CASE("LARS follows You et al.'s update per tensor", "[optimizers][lars]") {
  const auto c = lars_config(0.9, 0.01, 0.02);
  auto opt = make_local_optimizer(c, murmur::device::cpu(), kSize, layout());
  const auto p = run(*opt, 5, 2.0f);
  const auto want = reference(5, 2.0, 0.9, 0.01, 0.02);
  for (std::size_t i = 0; i < kSize; ++i) {
    INFO("float " << i);
    CHECK(p[i] == Approx(want[i]).margin(1e-6).epsilon(1e-5));
  }
  // The padding between the tensors never moves, and the weight did (against a plain step).
  for (std::size_t i = 6; i < 64; ++i) CHECK(p[i] == 0.0f);
  CHECK(p[0] != start_params()[0]);
  REQUIRE(dynamic_cast<Lars&>(*opt).last_trust().size() == 1);  // the bias is not adapted
}

TEST_CASE("a LARS weight step does not depend on the gradient's scale", "[optimizers][lars]") {
  // Without weight decay, trust * g = eta ||w|| g / ||g||: a gradient 1000x larger moves the
  // weight exactly as far. The bias, not adapted, moves 1000x further.
  const auto c = lars_config(0.0, 0.0, 0.01);
  auto small = make_local_optimizer(c, murmur::device::cpu(), kSize, layout());
  auto large = make_local_optimizer(c, murmur::device::cpu(), kSize, layout());
  const auto start = start_params();
  const auto p1 = run(*small, 1, 1.0f, 1.0f);
  const auto p2 = run(*large, 1, 1.0f, 1000.0f);
  double step_norm = 0, w_norm = 0;
  for (int i = 0; i < 6; ++i) {
    CHECK(p2[i] == Approx(p1[i]).epsilon(1e-6));
    step_norm += (p1[i] - start[i]) * (p1[i] - start[i]);
    w_norm += start[i] * start[i];
  }
  // ... and that step is eta ||w|| long.
  CHECK(std::sqrt(step_norm) == Approx(0.01 * std::sqrt(w_norm)).epsilon(1e-5));
  CHECK((start[64] - p2[64]) == Approx(1000 * (start[64] - p1[64])).epsilon(1e-4));
}

TEST_CASE("LARS: zero weights take the plain step, and the layout is checked", "[optimizers][lars]") {
  const auto c = lars_config(0.0, 0.0, 0.001);
  // An empty layout is one tensor over the arena; all-zero weights have no trust ratio (1).
  auto opt = make_local_optimizer(c, murmur::device::cpu(), 4);
  std::vector<float> p(4, 0.0f), g = {1.0f, -2.0f, 0.5f, 0.0f};
  opt->step(p, g, 0.1f);
  CHECK(p == std::vector<float>{-0.1f, 0.2f, -0.05f, 0.0f});
  CHECK(dynamic_cast<Lars&>(*opt).last_trust() == std::vector<double>{1.0});
  const std::vector<ArenaEntry> past = {{"w", {4, 4}, 64, 16}};
  CHECK_THROWS_AS(make_local_optimizer(c, murmur::device::cpu(), 64, past), murmur::Error);
  auto nesterov = c;
  nesterov.nesterov = true;
  CHECK_THROWS_AS(make_local_optimizer(nesterov, murmur::device::cpu(), 4), murmur::ConfigError);
}

TEST_CASE("LARS gives the same bits off the host as on it", "[optimizers][lars]") {
  // The off-host CPU device runs every op through the device path a GPU peer takes.
  const auto c = lars_config(0.9, 0.001, 0.02);
  auto offhost = murmur::device::make_offhost_cpu();
  auto host = make_local_optimizer(c, murmur::device::cpu(), kSize, layout());
  auto away = make_local_optimizer(c, *offhost, kSize, layout());
  CHECK(run(*host, 4, 1.0f) == run(*away, 4, 1.0f));
}
