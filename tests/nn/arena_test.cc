// The model's arenas: every parameter and gradient view aligned, grads laid out as params, the
// padding still zero after training steps (the transport and checkpoints ship flat()).
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include "nn/model.h"

using namespace murmur;
using namespace murmur::nn;

TEST_CASE("Model arenas are aligned, mirrored and zero-padded", "[arena][model]") {
  ModelConfig config;
  config.hidden = {7, 5};  // odd sizes, so every tensor is followed by padding
  Rng rng(1);
  auto model = Model::create(config, Shape3{1, 3, 3}, 3, rng);
  Arena& params = model->params();
  Arena& grads = model->grads();
  REQUIRE_NOTHROW(params.check_same_layout(grads));
  for (std::size_t i = 0; i < params.size(); ++i) {
    REQUIRE(reinterpret_cast<std::uintptr_t>(params.view(i).data()) % 256 == 0);
    REQUIRE(reinterpret_cast<std::uintptr_t>(grads.view(i).data()) % 256 == 0);
  }
  std::vector<float> x(4 * 9, 0.5f);
  std::vector<std::int32_t> labels = {0, 1, 2, 0};
  Rng step(2);
  for (int s = 0; s < 3; ++s) model->train_batch(x.data(), labels.data(), 4, step);
  std::vector<bool> covered(params.flat().size(), false);
  for (const ArenaEntry& e : params.entries())
    for (std::size_t i = 0; i < e.numel; ++i) covered[e.offset + i] = true;
  bool any_grad = false;
  for (std::size_t i = 0; i < covered.size(); ++i) {
    if (covered[i]) {
      any_grad = any_grad || grads.flat()[i] != 0.0f;
      continue;
    }
    REQUIRE(params.flat()[i] == 0.0f);
    REQUIRE(grads.flat()[i] == 0.0f);
  }
  REQUIRE(any_grad);
}
