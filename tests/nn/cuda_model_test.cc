// CudaModel against nn::Model (the MLP and the CNN of ModelConfig): the same parameter names
// and layout, the same loss and gradients of a training batch, the same evaluation (the op
// table's kernels, optimizers' updates included, are tests/device/cuda_ops_test.cc's).
// [cuda]: skipped without a GPU.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/config.h"
#include "core/error.h"
#include "nn/cuda/context.h"
#include "nn/cuda/model.h"
#include "nn/model.h"
#include "tests/nn/cuda_test_util.h"

namespace murmur::nn::cuda {
namespace {

using testing::download;
using testing::expect_close;
using testing::random_vector;

std::vector<float> as_vector(std::span<const float> s) { return {s.begin(), s.end()}; }

void check_model(const std::string& name, int n) {
  ModelConfig config;
  config.name = name;
  Rng init(11);
  auto host = Model::create(config, Shape3{1, 28, 28}, 10, init);
  Context cx(0);
  CudaModel device(*host, cx);
  // The same names, shapes and offsets: a checkpoint of either is the same safetensors.
  REQUIRE(device.params().entries().size() == host->params().entries().size());
  for (std::size_t i = 0; i < host->params().entries().size(); ++i) {
    CHECK(device.params().entries()[i].name == host->params().entries()[i].name);
    CHECK(device.params().entries()[i].offset == host->params().entries()[i].offset);
  }
  Rng rng(5);
  const std::vector<float> x = random_vector(static_cast<std::size_t>(n) * 784, rng);
  std::vector<std::int32_t> labels(n);
  for (auto& l : labels) l = static_cast<std::int32_t>(rng.below(10));
  Rng a(9), b(9);
  const float host_loss = host->train_batch(x.data(), labels.data(), n, a);
  const float device_loss = device.train_batch(x.data(), labels.data(), n, b);
  expect_close(name + " loss", std::vector<float>{device_loss}, std::vector<float>{host_loss});
  for (const ArenaEntry& e : host->grads().entries()) {
    expect_close(name + " grad " + e.name, download(device.grads().view(e.name), e.numel),
                 as_vector(host->grads().view(e.name)));
  }
  const EvalResult he = host->evaluate(x.data(), labels.data(), n);
  const EvalResult de = device.evaluate(x.data(), labels.data(), n);
  expect_close(name + " eval loss", std::vector<float>{static_cast<float>(de.loss_sum)},
               std::vector<float>{static_cast<float>(he.loss_sum)});
  CHECK(std::abs(de.correct - he.correct) <= 1);  // a near-tie may fall either way
  CHECK(de.count == n);

  // Round trip through the host arena.
  Arena copy = host->params().clone_layout();
  device.params().copy_to_host(copy, cx.stream());
  cx.synchronize();
  CHECK(as_vector(copy.flat()) == as_vector(host->params().flat()));

  std::vector<std::int32_t> bad = labels;
  bad[n / 2] = 10;
  CHECK_THROWS_AS(device.train_batch(x.data(), bad.data(), n, b), DataError);
}

TEST_CASE("CudaModel trains the MLP as nn::Model does", "[cuda][model]") {
  MURMUR_REQUIRE_GPU();
  check_model("mlp", 64);
  check_model("logreg", 17);
}

TEST_CASE("CudaModel trains the CNN as nn::Model does", "[cuda][model]") {
  MURMUR_REQUIRE_GPU();
  check_model("cnn", 32);
}

}  // namespace
}  // namespace murmur::nn::cuda
