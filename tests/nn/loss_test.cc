// Softmax cross-entropy: value and gradient against torch, stability, accuracy count, bad labels.
#include <cmath>

#include <catch2/catch.hpp>

#include "core/error.h"
#include "nn/loss.h"

using namespace murmur;
using namespace murmur::nn;

TEST_CASE("cross-entropy matches torch.nn.functional.cross_entropy", "[loss]") {
  float z[6] = {1.0f, 2.0f, 0.5f, -1.0f, 0.0f, 3.0f};
  float g[6];
  const std::int32_t labels[2] = {1, 0};
  Tensor logits(z, Shape{2, 3}), grad(g, Shape{2, 3});
  LossResult r = softmax_cross_entropy(logits, labels, &grad);
  REQUIRE(r.loss_sum / 2 == Approx(2.2651264667510986).epsilon(1e-6));
  REQUIRE(r.correct == 1);
  const double torch_grad[6] = {0.11561194062232971, -0.18573415279388428, 0.07012218981981277,
                                -0.4914260804653168, 0.023306312039494514, 0.4681197702884674};
  for (int i = 0; i < 6; ++i) REQUIRE(g[i] == Approx(torch_grad[i]).margin(1e-6));
}

TEST_CASE("cross-entropy is stable for large logits", "[loss]") {
  float z[3] = {1000.0f, 0.0f, -1000.0f};
  float g[3];
  const std::int32_t label = 0;
  Tensor logits(z, Shape{1, 3}), grad(g, Shape{1, 3});
  LossResult r = softmax_cross_entropy(logits, &label, &grad);
  REQUIRE(std::isfinite(r.loss_sum));
  REQUIRE(r.loss_sum == Approx(0.0).margin(1e-12));
  const std::int32_t wrong = 2;
  r = softmax_cross_entropy(logits, &wrong, nullptr);
  REQUIRE(r.loss_sum == Approx(2000.0));
  REQUIRE(r.correct == 0);
}

TEST_CASE("cross-entropy gradient rows sum to zero and labels are checked", "[loss]") {
  float z[8] = {0.1f, -0.2f, 0.3f, 0.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  float g[8];
  const std::int32_t labels[2] = {3, 2};
  Tensor logits(z, Shape{2, 4}), grad(g, Shape{2, 4});
  softmax_cross_entropy(logits, labels, &grad);
  for (int i = 0; i < 2; ++i) {
    double s = 0;
    for (int j = 0; j < 4; ++j) s += g[i * 4 + j];
    REQUIRE(s == Approx(0.0).margin(1e-7));
  }
  // Uniform logits: p = 1/4, grad = (p - 1{j = label}) / n.
  REQUIRE(g[4] == Approx(0.125));
  REQUIRE(g[6] == Approx(-0.375));
  const std::int32_t bad[2] = {0, 4};
  REQUIRE_THROWS_AS(softmax_cross_entropy(logits, bad, nullptr), DataError);
  const std::int32_t negative[2] = {-1, 0};
  REQUIRE_THROWS_AS(softmax_cross_entropy(logits, negative, nullptr), DataError);
}
