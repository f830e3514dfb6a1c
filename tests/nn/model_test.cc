// Model: PyTorch state_dict names and shapes, deterministic init, whole-model gradients
// against finite differences, training lowers the loss, evaluate agrees with train_batch.
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include <catch2/catch.hpp>

#include "core/error.h"
#include "nn/cpu/threads.h"
#include "nn/model.h"

using namespace murmur;
using namespace murmur::nn;

namespace {

struct Expected {
  const char* name;
  std::vector<std::int64_t> shape;
};

// Printed by torch 1.13: a module with fc1 = nn.Linear(784, 512), fc2 = nn.Linear(512, 256),
// fc3 = nn.Linear(256, 10); `for k, v in m.state_dict().items(): print(k, list(v.shape))`.
const std::vector<Expected> kTorchMlp = {
    {"fc1.weight", {512, 784}}, {"fc1.bias", {512}}, {"fc2.weight", {256, 512}},
    {"fc2.bias", {256}},        {"fc3.weight", {10, 256}}, {"fc3.bias", {10}}};

std::vector<float> random_images(int n, int size, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(static_cast<std::size_t>(n) * size);
  for (float& v : x) v = static_cast<float>(rng.normal());
  return x;
}

ModelConfig mlp(std::vector<int> hidden, double dropout = 0.0) {
  ModelConfig c;
  c.name = "mlp";
  c.hidden = std::move(hidden);
  c.dropout = dropout;
  return c;
}

}  // namespace

TEST_CASE("MLP tensors are named and shaped as the PyTorch state_dict", "[model]") {
  Rng rng(0);
  auto model = Model::create(mlp({512, 256}, 0.2), Shape3{1, 28, 28}, 10, rng);
  const auto& entries = model->params().entries();
  REQUIRE(entries.size() == kTorchMlp.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    INFO(entries[i].name);
    REQUIRE(entries[i].name == kTorchMlp[i].name);
    REQUIRE(entries[i].shape == kTorchMlp[i].shape);
  }
  REQUIRE(model->num_params() == 535818);  // sum(p.numel() for p in m.parameters())
  REQUIRE(model->buffers().size() == 0);
  REQUIRE(model->describe().find("535818 parameters") != std::string::npos);

  auto logreg_config = mlp({});
  logreg_config.name = "logreg";
  auto logreg = Model::create(logreg_config, Shape3{1, 28, 28}, 10, rng);
  REQUIRE(logreg->params().entries().size() == 2);
  REQUIRE(logreg->params().entries()[0].name == "fc1.weight");
  REQUIRE(logreg->params().entries()[0].shape == std::vector<std::int64_t>{10, 784});
}

TEST_CASE("CNN tensors are named and shaped as the PyTorch state_dict", "[model][cnn]") {
  Rng rng(0);
  ModelConfig c;
  c.name = "cnn";
  auto model = Model::create(c, Shape3{1, 28, 28}, 10, rng);
  const std::vector<Expected> torch_cnn = {
      {"conv1.weight", {32, 1, 5, 5}}, {"conv1.bias", {32}}, {"conv2.weight", {64, 32, 5, 5}},
      {"conv2.bias", {64}},            {"fc1.weight", {512, 1024}}, {"fc1.bias", {512}},
      {"fc2.weight", {10, 512}},       {"fc2.bias", {10}}};
  const auto& entries = model->params().entries();
  REQUIRE(entries.size() == torch_cnn.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    INFO(entries[i].name);
    REQUIRE(entries[i].name == torch_cnn[i].name);
    REQUIRE(entries[i].shape == torch_cnn[i].shape);
  }
  REQUIRE(model->num_params() == 582026);
}

TEST_CASE("Model rejects bad configs", "[model]") {
  Rng rng(0);
  ModelConfig c = mlp({8});
  c.name = "transformer";
  REQUIRE_THROWS_AS(Model::create(c, Shape3{1, 4, 4}, 3, rng), ConfigError);
  REQUIRE_THROWS_AS(Model::create(mlp({8}), Shape3{0, 4, 4}, 3, rng), ConfigError);
  REQUIRE_THROWS_AS(Model::create(mlp({8}), Shape3{1, 4, 4}, 1, rng), ConfigError);
  REQUIRE_THROWS_AS(Model::create(mlp({0}), Shape3{1, 4, 4}, 3, rng), ConfigError);
}

TEST_CASE("Same seed gives the same bits, another seed other bits", "[model]") {
  Rng a(42), b(42), c(43);
  auto ma = Model::create(mlp({16, 8}), Shape3{1, 5, 5}, 4, a);
  auto mb = Model::create(mlp({16, 8}), Shape3{1, 5, 5}, 4, b);
  auto mc = Model::create(mlp({16, 8}), Shape3{1, 5, 5}, 4, c);
  auto fa = ma->params().flat(), fb = mb->params().flat(), fc = mc->params().flat();
  REQUIRE(std::memcmp(fa.data(), fb.data(), fa.size_bytes()) == 0);
  REQUIRE(std::memcmp(fa.data(), fc.data(), fa.size_bytes()) != 0);
}

TEST_CASE("Whole-model gradient matches finite differences", "[model][gradcheck]") {
  Rng rng(7);
  auto model = Model::create(mlp({6, 5}), Shape3{1, 2, 3}, 4, rng);
  const int n = 5;
  auto x = random_images(n, 6, 1);
  const std::int32_t labels[n] = {0, 3, 1, 2, 3};
  Rng step_rng(1);
  model->train_batch(x.data(), labels, n, step_rng);
  std::vector<float> analytic(model->grads().flat().begin(), model->grads().flat().end());
  // Numeric: the mean loss from evaluate (no dropout here, so it is the training loss).
  auto loss = [&] { return model->evaluate(x.data(), labels, n).loss_sum / n; };
  // Small eps: a hidden pre-activation closer than eps to the ReLU kink spoils the difference.
  const double eps = 1e-3;
  double diff = 0, norm = 0;
  for (const ArenaEntry& e : model->params().entries()) {
    for (std::size_t i = 0; i < e.numel; ++i) {
      float& p = model->params().flat()[e.offset + i];
      const float saved = p;
      p = saved + static_cast<float>(eps);
      const double up = loss();
      p = saved - static_cast<float>(eps);
      const double down = loss();
      p = saved;
      const double numeric = (up - down) / (2 * eps);
      diff += (numeric - analytic[e.offset + i]) * (numeric - analytic[e.offset + i]);
      norm += numeric * numeric;
    }
  }
  INFO("relative error " << std::sqrt(diff / norm));
  REQUIRE(std::sqrt(diff / norm) < 1e-3);
}

TEST_CASE("Training lowers the loss; evaluate agrees with train_batch", "[model]") {
  Rng rng(3);
  auto model = Model::create(mlp({32}), Shape3{1, 4, 4}, 3, rng);
  const int n = 24;
  auto x = random_images(n, 16, 2);
  std::vector<std::int32_t> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = i % 3;
  Rng step_rng(9);
  const EvalResult before = model->evaluate(x.data(), labels.data(), n);
  REQUIRE(before.count == n);
  const float first = model->train_batch(x.data(), labels.data(), n, step_rng);
  REQUIRE(first == Approx(before.loss_sum / n).epsilon(1e-5));
  // Plain SGD on the flat arenas, as the optimizers do.
  float last = first;
  for (int step = 0; step < 200; ++step) {
    auto p = model->params().flat();
    auto g = model->grads().flat();
    for (std::size_t i = 0; i < p.size(); ++i) p[i] -= 0.1f * g[i];
    last = model->train_batch(x.data(), labels.data(), n, step_rng);
  }
  REQUIRE(last < 0.1f * first);
  const EvalResult after = model->evaluate(x.data(), labels.data(), n);
  REQUIRE(after.correct == n);
  // A smaller batch after a larger one reuses the buffers and still gives the same numbers.
  const EvalResult part = model->evaluate(x.data(), labels.data(), 5);
  double part_sum = 0;
  for (int i = 0; i < 5; ++i) part_sum += model->evaluate(x.data() + 16 * i, &labels[i], 1).loss_sum;
  REQUIRE(part.loss_sum == Approx(part_sum).epsilon(1e-5));
  std::vector<std::int32_t> bad = labels;
  bad[2] = 3;
  REQUIRE_THROWS_AS(model->train_batch(x.data(), bad.data(), n, step_rng), DataError);
}

TEST_CASE("Dropout makes training steps random but evaluation deterministic", "[model]") {
  Rng rng(4);
  auto model = Model::create(mlp({64}, 0.5), Shape3{1, 3, 3}, 2, rng);
  const int n = 8;
  auto x = random_images(n, 9, 3);
  std::vector<std::int32_t> labels(n, 1);
  Rng r1(1), r2(1), r3(2);
  const float a = model->train_batch(x.data(), labels.data(), n, r1);
  const float b = model->train_batch(x.data(), labels.data(), n, r2);
  const float c = model->train_batch(x.data(), labels.data(), n, r3);
  REQUIRE(a == b);  // same stream, same mask
  REQUIRE(a != c);
  REQUIRE(model->evaluate(x.data(), labels.data(), n).loss_sum ==
          model->evaluate(x.data(), labels.data(), n).loss_sum);
}

TEST_CASE("Steady training reuses its buffers; thread counts agree", "[model][threads]") {
  ModelConfig config = mlp({48, 24});
  Rng init_a(5), init_b(5);
  auto a = Model::create(config, Shape3{1, 6, 6}, 5, init_a);
  auto b = Model::create(config, Shape3{1, 6, 6}, 5, init_b);
  const int n = 32;
  auto x = random_images(n, 36, 4);
  std::vector<std::int32_t> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = i % 5;
  Rng ra(1), rb(1);
  nn::cpu::set_compute_threads(1);
  a->train_batch(x.data(), labels.data(), n, ra);
  const float* out = a->net().forward(x.data(), n, StepContext{}).data;
  for (int s = 0; s < 3; ++s) a->train_batch(x.data(), labels.data(), n, ra);
  // Same or smaller batches land in the same memory: no allocation per step.
  REQUIRE(a->net().forward(x.data(), n, StepContext{}).data == out);
  REQUIRE(a->net().forward(x.data(), n / 2, StepContext{}).data == out);

  nn::cpu::set_compute_threads(2);
  REQUIRE(nn::cpu::compute_threads() == 2);
  for (int s = 0; s < 4; ++s) b->train_batch(x.data(), labels.data(), n, rb);
  nn::cpu::set_compute_threads(1);
  auto ga = a->grads().flat(), gb = b->grads().flat();
  for (std::size_t i = 0; i < ga.size(); ++i) REQUIRE(gb[i] == Approx(ga[i]).margin(1e-6));
}

TEST_CASE("parallel_for covers the range once, in chunks", "[threads]") {
  for (int threads : {1, 2, 3}) {
    nn::cpu::set_compute_threads(threads);
    for (std::int64_t n : {0, 1, 7, 1000}) {
      std::vector<int> hits(static_cast<std::size_t>(n), 0);
      std::atomic<int> calls{0};
      nn::cpu::parallel_for(n, 4, [&](std::int64_t begin, std::int64_t end) {
        ++calls;
        for (std::int64_t i = begin; i < end; ++i) ++hits[static_cast<std::size_t>(i)];
      });
      for (int h : hits) REQUIRE(h == 1);
      REQUIRE(calls.load() <= threads);
      if (n >= 1000) REQUIRE(calls.load() == threads);
    }
  }
  nn::cpu::set_compute_threads(1);
}
