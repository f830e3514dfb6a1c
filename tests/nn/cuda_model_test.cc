// CudaModel against nn::Model (the MLP and the CNN of ModelConfig): the same parameter names
// and layout, the same loss and gradients of a training batch, the same evaluation; the device
// optimizers and averaging kernels against reference loops written as optimizers/ does them.
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
#include "nn/cuda/optimizer.h"
#include "nn/cuda/updates.h"
#include "nn/model.h"
#include "tests/nn/cuda_test_util.h"

namespace murmur::nn::cuda {
namespace {

using testing::download;
using testing::expect_close;
using testing::random_vector;
using testing::upload;

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

// optimizers/sgd.cc and adamw.cc, element by element.
void reference_step(const OptimizerConfig& c, std::vector<float>& p, const std::vector<float>& g,
                    std::vector<float>& s1, std::vector<float>& s2, float lr, std::int64_t t0) {
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (c.name == "sgd") {
      const float wd = static_cast<float>(c.weight_decay), mu = static_cast<float>(c.momentum);
      const float d = g[i] + wd * p[i];
      if (mu == 0.0f) {
        p[i] -= lr * d;
        continue;
      }
      s1[i] = t0 == 0 ? d : mu * s1[i] + d;
      p[i] -= lr * (c.nesterov ? d + mu * s1[i] : s1[i]);
    } else {
      const double t = static_cast<double>(t0 + 1);
      const double bias1 = 1.0 - std::pow(c.beta1, t);
      const double bias2_sqrt = std::sqrt(1.0 - std::pow(c.beta2, t));
      p[i] *= static_cast<float>(1.0 - lr * c.weight_decay);
      s1[i] = static_cast<float>(c.beta1) * s1[i] + static_cast<float>(1.0 - c.beta1) * g[i];
      s2[i] = static_cast<float>(c.beta2) * s2[i] + static_cast<float>(1.0 - c.beta2) * g[i] * g[i];
      const float denom = std::sqrt(s2[i]) * static_cast<float>(1.0 / bias2_sqrt) +
                          static_cast<float>(c.eps);
      p[i] -= static_cast<float>(lr / bias1) * s1[i] / denom;
    }
  }
}

TEST_CASE("CUDA SGD and AdamW updates match the CPU arithmetic", "[cuda][optimizer]") {
  MURMUR_REQUIRE_GPU();
  const std::size_t n = 10000;
  std::vector<OptimizerConfig> configs(4);
  configs[0].momentum = 0;
  configs[1].weight_decay = 1e-3;
  configs[2].nesterov = true;
  configs[2].weight_decay = 5e-4;
  configs[3].name = "adamw";
  configs[3].weight_decay = 0.01;
  const char* names[] = {"SGD", "SGD momentum+wd", "SGD nesterov", "AdamW"};
  Context cx(0);
  for (std::size_t k = 0; k < configs.size(); ++k) {
    Rng rng(k + 1);
    std::vector<float> p = random_vector(n, rng), s1(n, 0.0f), s2(n, 0.0f);
    DeviceBuffer dp = upload(p);
    CudaOptimizer opt(configs[k], n);
    for (std::int64_t t = 0; t < 3; ++t) {
      const std::vector<float> g = random_vector(n, rng);
      DeviceBuffer dg = upload(g);
      opt.step(dp.floats(), dg.floats(), 0.05f, t, cx.stream());
      reference_step(configs[k], p, g, s1, s2, 0.05f, t);
      cx.synchronize();
    }
    expect_close(std::string(names[k]) + " params after 3 steps", download(dp.floats(), n), p);
  }
}

TEST_CASE("CUDA averaging kernels match the CPU arithmetic", "[cuda][averaging]") {
  MURMUR_REQUIRE_GPU();
  const std::size_t n = 50000;
  Context cx(0);
  Rng rng(21);
  std::vector<float> x = random_vector(n, rng);
  std::vector<std::vector<float>> in;
  std::vector<DeviceBuffer> din;
  std::vector<const float*> ptrs;
  std::vector<float> w;
  for (int k = 0; k < 11; ++k) {  // more than one launch's worth of inputs
    in.push_back(random_vector(n, rng));
    din.push_back(upload(in.back()));
    ptrs.push_back(din.back().floats());
    w.push_back(static_cast<float>(rng.uniform(0, 0.1)));
  }
  DeviceBuffer dx = upload(x);
  mix(dx.floats(), n, 0.25f, ptrs, w, cx.stream());
  std::vector<float> want = x;
  for (std::size_t i = 0; i < n; ++i) {
    float acc = 0.25f * want[i];
    for (std::size_t k = 0; k < in.size(); ++k) acc += w[k] * in[k][i];
    want[i] = acc;
  }
  expect_close("mix (11 inputs)", download(dx.floats(), n), want);

  DeviceBuffer dy = upload(x);
  axpby(dy.floats(), 0.5f, din[0].floats(), -2.0f, n, cx.stream());
  axpy(dy.floats(), 3.0f, din[1].floats(), n, cx.stream());
  add_scaled_diff(dy.floats(), 0.7f, din[2].floats(), din[3].floats(), n, cx.stream());
  scale(dy.floats(), 1.5f, n, cx.stream());
  for (std::size_t i = 0; i < n; ++i) {
    float y = 0.5f * in[0][i] + -2.0f * x[i];
    y += 3.0f * in[1][i];
    y += 0.7f * (in[2][i] - in[3][i]);
    want[i] = y * 1.5f;
  }
  expect_close("axpby, axpy, add_scaled_diff, scale", download(dy.floats(), n), want);

  double d2 = 0;
  for (std::size_t i = 0; i < n; ++i) d2 += std::pow(double(in[4][i]) - in[5][i], 2);
  const double got = squared_distance(din[4].floats(), din[5].floats(), n, cx.stream());
  expect_close("squared_distance", std::vector<float>{static_cast<float>(got)},
               std::vector<float>{static_cast<float>(d2)});
}

}  // namespace
}  // namespace murmur::nn::cuda
