// Linear: forward against a hand computation, gradients against finite differences (also with
// the fused ReLU), PyTorch's init bounds, and a deliberately wrong layer the checker must catch.
#include <cmath>

#include <catch2/catch.hpp>

#include "core/error.h"
#include "nn/activations.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "tests/nn/gradcheck.h"

using namespace murmur;
using namespace murmur::nn;

TEST_CASE("Linear forward is x W^T + b", "[linear]") {
  Linear fc(3, 2);
  Arena params, buffers;
  ParamDeclarer decl(params, buffers, "fc1.");
  fc.declare(decl);
  params.allocate();
  buffers.allocate();
  Arena grads = params.clone_layout();
  ParamViews views(params, grads, buffers);
  fc.bind(views);
  REQUIRE(params.entries()[0].name == "fc1.weight");
  REQUIRE(params.entries()[0].shape == std::vector<std::int64_t>{2, 3});
  REQUIRE(params.entries()[1].name == "fc1.bias");
  const float w[6] = {1, 2, 3, 4, 5, 6};
  std::copy(w, w + 6, params.view("fc1.weight").begin());
  params.view("fc1.bias")[0] = 0.5f;
  params.view("fc1.bias")[1] = -1.0f;
  float x[6] = {1, 0, -1, 2, 1, 0};
  float y[4];
  Tensor tx(x, Shape{2, 3}), ty(y, Shape{2, 2});
  fc.forward(tx, ty, {}, StepContext{});
  REQUIRE(y[0] == Approx(1 - 3 + 0.5));
  REQUIRE(y[1] == Approx(4 - 6 - 1));
  REQUIRE(y[2] == Approx(2 + 2 + 0.5));
  REQUIRE(y[3] == Approx(8 + 5 - 1));
  REQUIRE_THROWS_AS(fc.output_shape(Shape{4}), ConfigError);
  REQUIRE_THROWS_AS(Linear(0, 3), ConfigError);
}

TEST_CASE("Linear gradients match finite differences", "[linear][gradcheck]") {
  Linear fc(7, 5);
  auto r = testing::grad_check(fc, Shape{7});
  INFO(r.str());
  REQUIRE(r.max_error() < 1e-3);
  REQUIRE(r.accumulate_ok);
  REQUIRE(r.input_untouched);
  REQUIRE(r.param_errors.size() == 2);
}

TEST_CASE("Linear with a fused ReLU matches finite differences", "[linear][gradcheck]") {
  Linear fc(6, 4);
  ReLU relu;
  REQUIRE(fc.absorb(relu));
  REQUIRE_FALSE(fc.absorb(relu));  // only once
  REQUIRE(fc.fused_relu());
  // Small inputs keep pre-activations away from the kink at 0 less than eps.
  testing::GradCheckOptions opt;
  opt.batch = 4;
  opt.eps = 1e-3;
  auto r = testing::grad_check(fc, Shape{6}, opt);
  INFO(r.str());
  REQUIRE(r.max_error() < 1e-3);
}

TEST_CASE("Linear without bias", "[linear][gradcheck]") {
  Linear fc(4, 3, false);
  auto r = testing::grad_check(fc, Shape{4});
  INFO(r.str());
  REQUIRE(r.param_errors.size() == 1);
  REQUIRE(r.max_error() < 1e-3);
}

namespace {
// Backward is off by a factor: the checker has to notice.
class BrokenLinear : public Linear {
 public:
  using Linear::Linear;
  void backward(const Tensor& in, const Tensor& out, Tensor& grad_out, Tensor& grad_in,
                std::span<float> ws, const StepContext& ctx) override {
    for (float& g : grad_out.span()) g *= 1.01f;
    Linear::backward(in, out, grad_out, grad_in, ws, ctx);
  }
};
}  // namespace

TEST_CASE("grad_check catches a 1% gradient error", "[linear][gradcheck]") {
  BrokenLinear fc(5, 3);
  auto r = testing::grad_check(fc, Shape{5});
  INFO(r.str());
  REQUIRE(r.max_error() > 5e-3);
}

TEST_CASE("Linear init uses PyTorch's bounds", "[linear][init]") {
  REQUIRE(default_weight_bound(784) == Approx(1.0 / 28.0));
  REQUIRE(default_bias_bound(784) == Approx(1.0 / 28.0));
  Linear fc(400, 300);
  Arena params, buffers;
  ParamDeclarer decl(params, buffers, "");
  fc.declare(decl);
  params.allocate();
  Arena grads = params.clone_layout();
  buffers.allocate();
  ParamViews views(params, grads, buffers);
  fc.bind(views);
  Rng rng(3);
  fc.init(rng);
  const double bound = 1.0 / 20.0;
  double max_abs = 0, sum = 0, sum_sq = 0;
  auto w = params.view("weight");
  for (float v : w) {
    max_abs = std::max(max_abs, std::abs(static_cast<double>(v)));
    sum += v;
    sum_sq += static_cast<double>(v) * v;
  }
  REQUIRE(max_abs <= bound);
  REQUIRE(max_abs > 0.99 * bound);
  // U(-b, b) has variance b^2 / 3.
  const double var = sum_sq / w.size() - (sum / w.size()) * (sum / w.size());
  REQUIRE(var == Approx(bound * bound / 3).epsilon(0.02));
  for (float v : params.view("bias")) REQUIRE(std::abs(v) <= bound);
}
