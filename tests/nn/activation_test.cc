// ReLU, GELU (exact erf, torch's default), Dropout, Flatten: values and gradients.
#include <cmath>

#include <catch2/catch.hpp>

#include "core/error.h"
#include "nn/activations.h"
#include "nn/dropout.h"
#include "nn/flatten.h"
#include "tests/nn/gradcheck.h"

using namespace murmur;
using namespace murmur::nn;

TEST_CASE("ReLU and GELU values match torch", "[activation]") {
  float x[5] = {-1.5f, -0.3f, 0.0f, 0.7f, 2.0f};
  float y[5];
  Tensor tx(x, Shape{1, 5}), ty(y, Shape{1, 5});
  ReLU relu;
  relu.forward(tx, ty, {}, StepContext{});
  const float relu_expected[5] = {0, 0, 0, 0.7f, 2.0f};
  for (int i = 0; i < 5; ++i) REQUIRE(y[i] == relu_expected[i]);
  GELU gelu;
  gelu.forward(tx, ty, {}, StepContext{});
  // torch.nn.functional.gelu(torch.tensor([-1.5, -0.3, 0.0, 0.7, 2.0]))
  const double torch_gelu[5] = {-0.10021086037158966, -0.11462658643722534, 0.0,
                                0.5306254625320435, 1.9544999599456787};
  for (int i = 0; i < 5; ++i) REQUIRE(y[i] == Approx(torch_gelu[i]).margin(1e-7));
}

TEST_CASE("activation gradients match finite differences", "[activation][gradcheck]") {
  ReLU relu;
  auto r = testing::grad_check(relu, Shape{3, 2, 2});
  INFO("relu " << r.str());
  REQUIRE(r.max_error() < 1e-3);
  GELU gelu;
  testing::GradCheckOptions opt;
  opt.fill_input = [](std::span<float> x, Rng& rng) {
    for (float& v : x) v = static_cast<float>(rng.uniform(-3, 3));
  };
  auto g = testing::grad_check(gelu, Shape{10}, opt);
  INFO("gelu " << g.str());
  REQUIRE(g.max_error() < 1e-3);
  Flatten flatten;
  auto f = testing::grad_check(flatten, Shape{2, 3, 2});
  REQUIRE(f.max_error() < 1e-3);
  REQUIRE(flatten.output_shape(Shape{2, 3, 2}) == Shape{12});
}

TEST_CASE("Dropout drops with probability p and scales the rest", "[activation][dropout]") {
  Dropout drop(0.25);
  const std::int64_t n = 20000;
  std::vector<float> x(n, 1.0f), y(n), mask(drop.workspace_floats(Shape{n}, 1));
  Tensor tx(x.data(), Shape{1, n}), ty(y.data(), Shape{1, n});
  Rng rng(5);
  drop.forward(tx, ty, mask, StepContext{true, &rng, false});
  std::int64_t zeros = 0;
  for (float v : y) {
    if (v == 0.0f) ++zeros;
    else REQUIRE(v == Approx(1.0 / 0.75));
  }
  // Binomial(20000, 0.25): mean 5000, sd ~61; 6 sd bounds.
  REQUIRE(zeros > 5000 - 370);
  REQUIRE(zeros < 5000 + 370);
  // Backward uses the same mask.
  std::vector<float> gy(n, 2.0f), gx(n);
  Tensor tgy(gy.data(), Shape{1, n}), tgx(gx.data(), Shape{1, n});
  drop.backward(tx, ty, tgy, tgx, mask, StepContext{true, &rng, false});
  for (std::int64_t i = 0; i < n; ++i) REQUIRE(gx[i] == Approx(2.0f * y[i]));
  // Evaluation is the identity.
  drop.forward(tx, ty, mask, StepContext{});
  for (float v : y) REQUIRE(v == 1.0f);
  REQUIRE_THROWS_AS(Dropout(1.0), ConfigError);
  REQUIRE_THROWS_AS(Dropout(-0.1), ConfigError);
}

TEST_CASE("Dropout gradient matches finite differences with a fixed mask", "[activation][gradcheck]") {
  Dropout drop(0.5);
  auto r = testing::grad_check(drop, Shape{8});
  INFO(r.str());
  REQUIRE(r.max_error() < 1e-3);
}
