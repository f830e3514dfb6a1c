// BatchNorm2d: training and evaluation forward against the definition in double, running
// statistics (momentum, unbiased variance) over several steps, and backward in both modes
// against finite differences.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "core/arena.h"
#include "core/error.h"
#include "core/rng.h"
#include "gradcheck.h"
#include "nn/batchnorm.h"

namespace {

using murmur::Arena;
using murmur::Rng;
using murmur::nn::BatchNorm2d;
using murmur::nn::Shape;
using murmur::nn::Tensor;

// A BatchNorm2d declared into its own arenas, bound and initialized.
struct Bound {
  Arena params, grads, buffers;
  BatchNorm2d layer;
  explicit Bound(std::int64_t c, float momentum = 0.1f) : layer(c, 1e-5f, momentum) {
    murmur::nn::ParamDeclarer decl(params, buffers, "bn1.");
    layer.declare(decl);
    params.allocate();
    buffers.allocate();
    grads = params.clone_layout();
    murmur::nn::ParamViews views(params, grads, buffers);
    layer.bind(views);
    Rng rng(0);
    layer.init(rng);
  }
};

}  // namespace

TEST_CASE("BatchNorm2d declares PyTorch's names and initial values", "[nn][batchnorm]") {
  Bound bn(3);
  REQUIRE(bn.params.size() == 2);
  CHECK(bn.params.entries()[0].name == "bn1.weight");
  CHECK(bn.params.entries()[1].name == "bn1.bias");
  REQUIRE(bn.buffers.size() == 3);
  CHECK(bn.buffers.entries()[0].name == "bn1.running_mean");
  CHECK(bn.buffers.entries()[1].name == "bn1.running_var");
  CHECK(bn.buffers.entries()[2].name == "bn1.num_batches_tracked");
  CHECK(bn.buffers.entries()[2].shape.empty());
  for (float v : bn.params.view("bn1.weight")) CHECK(v == 1.0f);
  for (float v : bn.params.view("bn1.bias")) CHECK(v == 0.0f);
  for (float v : bn.buffers.view("bn1.running_mean")) CHECK(v == 0.0f);
  for (float v : bn.buffers.view("bn1.running_var")) CHECK(v == 1.0f);
  CHECK_THROWS_AS(bn.layer.output_shape({2, 4, 4}), murmur::ConfigError);
  CHECK(bn.layer.output_shape({3, 4, 5}) == Shape{3, 4, 5});
  CHECK_THROWS_AS(BatchNorm2d(0), murmur::ConfigError);
  CHECK_THROWS_AS(BatchNorm2d(2, 1e-5f, 1.5f), murmur::ConfigError);
}

TEST_CASE("BatchNorm2d normalizes with batch statistics and tracks running ones",
          "[nn][batchnorm]") {
  const int n = 4, c = 2, h = 3, w = 5, plane = h * w, m = n * plane;
  Bound bn(c);
  auto weight = bn.params.view("bn1.weight");
  auto bias = bn.params.view("bn1.bias");
  weight[0] = 1.5f, weight[1] = -0.5f, bias[0] = 0.25f, bias[1] = 2.0f;
  const Shape shape{c, h, w};
  std::vector<float> x(n * c * plane), y(x.size()), ws(bn.layer.workspace_floats(shape, n));
  Tensor tx(x.data(), shape.batched(n)), ty(y.data(), shape.batched(n));
  Rng rng(11);
  std::vector<double> expect_mean(c, 0.0), expect_var(c, 1.0);
  for (int step = 0; step < 3; ++step) {
    // Each step a different offset and scale per channel, so the running stats move.
    for (int i = 0; i < n; ++i)
      for (int ch = 0; ch < c; ++ch)
        for (int p = 0; p < plane; ++p)
          x[(i * c + ch) * plane + p] =
              static_cast<float>(3.0 * ch - step + (1 + step) * rng.normal());
    murmur::nn::StepContext ctx{true, &rng, false};
    bn.layer.forward(tx, ty, ws, ctx);
    for (int ch = 0; ch < c; ++ch) {
      double mean = 0, ss = 0;
      for (int i = 0; i < n; ++i)
        for (int p = 0; p < plane; ++p) mean += x[(i * c + ch) * plane + p];
      mean /= m;
      for (int i = 0; i < n; ++i)
        for (int p = 0; p < plane; ++p) ss += std::pow(x[(i * c + ch) * plane + p] - mean, 2);
      const double invstd = 1.0 / std::sqrt(ss / m + 1e-5);
      for (int i = 0; i < n; ++i)
        for (int p = 0; p < plane; ++p) {
          const std::size_t k = (i * c + ch) * plane + p;
          CHECK(y[k] == Approx((x[k] - mean) * invstd * weight[ch] + bias[ch]).margin(1e-5));
        }
      // PyTorch: running = (1 - momentum) running + momentum * batch, variance unbiased.
      expect_mean[ch] = 0.9 * expect_mean[ch] + 0.1 * mean;
      expect_var[ch] = 0.9 * expect_var[ch] + 0.1 * ss / (m - 1);
      CHECK(bn.buffers.view("bn1.running_mean")[ch] == Approx(expect_mean[ch]).margin(1e-5));
      CHECK(bn.buffers.view("bn1.running_var")[ch] == Approx(expect_var[ch]).epsilon(1e-5));
    }
    CHECK(bn.buffers.view("bn1.num_batches_tracked")[0] == static_cast<float>(step + 1));
  }

  // Evaluation: the running statistics, and no buffer moves.
  const std::vector<float> before(bn.buffers.flat().begin(), bn.buffers.flat().end());
  murmur::nn::StepContext eval{false, nullptr, false};
  bn.layer.forward(tx, ty, ws, eval);
  CHECK(std::equal(before.begin(), before.end(), bn.buffers.flat().begin()));
  for (int i = 0; i < n; ++i)
    for (int ch = 0; ch < c; ++ch)
      for (int p = 0; p < plane; ++p) {
        const std::size_t k = (i * c + ch) * plane + p;
        const double expect =
            (x[k] - expect_mean[ch]) / std::sqrt(expect_var[ch] + 1e-5) * weight[ch] + bias[ch];
        CHECK(y[k] == Approx(expect).margin(1e-4));
      }
}

TEST_CASE("BatchNorm2d refuses to train on one value per channel", "[nn][batchnorm]") {
  Bound bn(2);
  std::vector<float> x(2, 1.0f), y(2), ws(4);
  Tensor tx(x.data(), Shape{1, 2, 1, 1}), ty(y.data(), Shape{1, 2, 1, 1});
  Rng rng(1);
  CHECK_THROWS_AS(bn.layer.forward(tx, ty, ws, {true, &rng, false}), murmur::Error);
  CHECK_NOTHROW(bn.layer.forward(tx, ty, ws, {false, nullptr, false}));
}

TEST_CASE("BatchNorm2d backward matches finite differences", "[nn][batchnorm][gradcheck]") {
  for (bool training : {true, false}) {
    DYNAMIC_SECTION((training ? "training" : "evaluation")) {
      BatchNorm2d bn(3);
      murmur::nn::testing::GradCheckOptions opt;
      opt.training = training;
      opt.eps = 1e-3;
      opt.batch = 4;
      // Non-default affine parameters and running stats would need access after init; the
      // random input (|x| in [0.1, 1]) and random r already make every term of dx nonzero.
      const auto r = murmur::nn::testing::grad_check(bn, {3, 2, 3}, opt);
      INFO(r.str());
      CHECK(r.max_error() < 1e-3);
      CHECK(r.accumulate_ok);
      CHECK(r.input_untouched);
    }
  }
}
