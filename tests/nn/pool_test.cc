// MaxPool2d and AvgPool2d: forward against a direct definition (stride, padding), backward
// routing to the first maximum, and both backwards against finite differences.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "gradcheck.h"
#include "nn/cpu/pool.h"
#include "nn/pool.h"

namespace {

using murmur::Rng;
using murmur::nn::cpu::PoolGeometry;

// The window of output (oh, ow) of plane p, read straight from the definition.
template <class F>
void for_window(const PoolGeometry& g, int oh, int ow, F&& f) {
  for (int i = 0; i < g.kernel_h; ++i)
    for (int j = 0; j < g.kernel_w; ++j) {
      const int h = oh * g.stride_h - g.pad_h + i, w = ow * g.stride_w - g.pad_w + j;
      f(h >= 0 && w >= 0 && h < g.in_h && w < g.in_w, h, w);
    }
}

void check_forward(const PoolGeometry& g) {
  CAPTURE(g.planes, g.in_h, g.in_w, g.kernel_h, g.kernel_w, g.stride_h, g.stride_w, g.pad_h,
          g.pad_w);
  g.validate();
  Rng rng(7);
  std::vector<float> x(g.in_size());
  for (float& v : x) v = static_cast<float>(rng.uniform(-1, 1));
  std::vector<float> ymax(g.out_size()), arg(g.out_size()), yavg(g.out_size());
  murmur::nn::cpu::maxpool2d_forward(g, x.data(), ymax.data(), arg.data());
  murmur::nn::cpu::avgpool2d_forward(g, x.data(), yavg.data());
  std::size_t k = 0;
  for (int p = 0; p < g.planes; ++p)
    for (int oh = 0; oh < g.out_h(); ++oh)
      for (int ow = 0; ow < g.out_w(); ++ow, ++k) {
        float best = -std::numeric_limits<float>::infinity();
        double sum = 0;
        for_window(g, oh, ow, [&](bool inside, int h, int w) {
          if (!inside) return;
          const float v = x[(static_cast<std::size_t>(p) * g.in_h + h) * g.in_w + w];
          best = std::max(best, v);
          sum += v;
        });
        CHECK(ymax[k] == best);
        CHECK(x[p * g.in_h * g.in_w + static_cast<int>(arg[k])] == best);
        CHECK(yavg[k] == Approx(sum / (g.kernel_h * g.kernel_w)).margin(1e-6));
      }
}

}  // namespace

TEST_CASE("pooling kernels match the definition", "[nn][pool]") {
  // planes, h, w, kh, kw, sh, sw, ph, pw
  check_forward({3, 6, 6, 2, 2, 2, 2, 0, 0});
  check_forward({2, 7, 5, 3, 3, 2, 2, 1, 1});
  check_forward({2, 5, 8, 2, 3, 1, 2, 1, 0});
  check_forward({1, 9, 9, 3, 3, 3, 3, 0, 0});
}

TEST_CASE("max pooling backward routes to the first maximum", "[nn][pool]") {
  const PoolGeometry g{1, 2, 4, 2, 2, 2, 2, 0, 0};
  // Window 0 holds a tie (3 at index 1 and 4); window 1 has its maximum at index 7.
  const std::vector<float> x{0, 3, 1, 2, 3, 1, 0, 5};
  std::vector<float> y(2), arg(2), dx(8, 9.0f);
  murmur::nn::cpu::maxpool2d_forward(g, x.data(), y.data(), arg.data());
  CHECK(y == std::vector<float>{3, 5});
  const std::vector<float> dy{10, 20};
  murmur::nn::cpu::maxpool2d_backward(g, dy.data(), arg.data(), dx.data());
  CHECK(dx == std::vector<float>{0, 10, 0, 0, 0, 0, 0, 20});
  // Overlapping windows add their gradients into a shared maximum.
  const PoolGeometry o{1, 1, 3, 1, 2, 1, 1, 0, 0};
  const std::vector<float> x3{1, 4, 2};
  std::vector<float> y3(2), a3(2), d3(3);
  murmur::nn::cpu::maxpool2d_forward(o, x3.data(), y3.data(), a3.data());
  murmur::nn::cpu::maxpool2d_backward(o, dy.data(), a3.data(), d3.data());
  CHECK(d3 == std::vector<float>{0, 30, 0});
}

TEST_CASE("pooling layers check their shapes", "[nn][pool]") {
  using murmur::nn::Shape;
  CHECK(murmur::nn::MaxPool2d(2).output_shape({32, 24, 24}) == Shape{32, 12, 12});
  CHECK(murmur::nn::MaxPool2d(2).output_shape({64, 9, 9}) == Shape{64, 4, 4});  // floor
  CHECK(murmur::nn::AvgPool2d(3, 2, 1).output_shape({4, 7, 7}) == Shape{4, 4, 4});
  CHECK_THROWS_AS(murmur::nn::MaxPool2d(3).output_shape({1, 2, 2}), murmur::ConfigError);
  CHECK_THROWS_AS(murmur::nn::MaxPool2d(2).output_shape({4, 4}), murmur::ConfigError);
  CHECK_THROWS_AS(murmur::nn::MaxPool2d(2, 2, 2), murmur::ConfigError);  // padding > kernel/2
  CHECK_THROWS_AS(murmur::nn::AvgPool2d(0), murmur::ConfigError);
}

TEST_CASE("pooling backward matches finite differences", "[nn][pool][gradcheck]") {
  murmur::nn::testing::GradCheckOptions opt;
  // Distinct values 0.05 apart (a shuffled ramp), so a step of eps never changes a maximum.
  opt.fill_input = [](std::span<float> x, Rng& rng) {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.05f * static_cast<float>(i) - 1.0f;
    for (std::size_t i = x.size(); i > 1; --i) std::swap(x[i - 1], x[rng.below(i)]);
  };
  opt.eps = 1e-3;
  struct Case {
    const char* name;
    murmur::nn::PoolOptions opt;
    murmur::nn::Shape input;
  };
  const Case cases[] = {
      {"2x2", {2, 2, 0, 0, 0, 0}, {2, 4, 6}},
      {"3x3 stride 2 pad 1", {3, 3, 2, 2, 1, 1}, {2, 5, 5}},
      {"2x3 stride 1x2 pad 1x0", {2, 3, 1, 2, 1, 0}, {1, 4, 7}},
  };
  for (const Case& c : cases) {
    SECTION(c.name) {
      murmur::nn::MaxPool2d max_pool(c.opt);
      const auto rmax = murmur::nn::testing::grad_check(max_pool, c.input, opt);
      INFO("max: " << rmax.str());
      CHECK(rmax.max_error() < 1e-3);
      CHECK(rmax.input_untouched);
      murmur::nn::AvgPool2d avg_pool(c.opt);
      const auto ravg = murmur::nn::testing::grad_check(avg_pool, c.input, opt);
      INFO("avg: " << ravg.str());
      CHECK(ravg.max_error() < 1e-3);
      CHECK(ravg.input_untouched);
    }
  }
}

TEST_CASE("max pooling propagates NaN as PyTorch does", "[nn][pool]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // The 2x2 fast path and the general path (3x3 window, stride 1) both keep a NaN once seen.
  for (const PoolGeometry g :
       {PoolGeometry{1, 2, 2, 2, 2, 2, 2, 0, 0}, PoolGeometry{1, 3, 3, 3, 3, 1, 1, 0, 0}}) {
    std::vector<float> x(g.in_size(), 1.0f);
    x[1] = nan;
    x.back() = 5.0f;  // a larger value after the NaN does not replace it
    std::vector<float> y(1), arg(1);
    murmur::nn::cpu::maxpool2d_forward(g, x.data(), y.data(), arg.data());
    CHECK(std::isnan(y[0]));
    CHECK(arg[0] == 1.0f);
  }
}
