#include "nn/cnn.h"

#include <fmt/format.h>

#include "core/error.h"
#include "nn/activations.h"
#include "nn/conv2d.h"
#include "nn/flatten.h"
#include "nn/linear.h"
#include "nn/pool.h"

namespace murmur::nn {
namespace {

// Side of the feature map after conv 5x5 (no padding) and max-pool 2, or 0 if it vanishes.
int conv_pool(int side) { return side >= 5 ? (side - 4) / 2 : 0; }

}  // namespace

void build_cnn(Sequential& net, Shape3 input, int classes) {
  const int h = conv_pool(conv_pool(input.h));
  const int w = conv_pool(conv_pool(input.w));
  if (input.c <= 0 || h <= 0 || w <= 0) {
    throw ConfigError(fmt::format(
        "model cnn: input {}x{}x{} is too small for two conv 5x5 + max-pool 2 stages (needs "
        "c >= 1 and h, w >= 16; the reference input is 1x28x28)",
        input.c, input.h, input.w));
  }
  if (classes <= 0) throw ConfigError(fmt::format("model cnn: {} classes", classes));
  // torch: nn.Conv2d(c, 32, 5), ReLU, MaxPool2d(2), nn.Conv2d(32, 64, 5), ReLU, MaxPool2d(2),
  // Flatten, nn.Linear(64*h*w, 512), ReLU, nn.Linear(512, classes): state_dict names conv1.*,
  // conv2.*, fc1.*, fc2.* as in that module.
  net.emplace<Conv2d>("conv1", input.c, 32, 5);
  net.emplace<ReLU>("");
  net.emplace<MaxPool2d>("", 2);
  net.emplace<Conv2d>("conv2", 32, 64, 5);
  net.emplace<ReLU>("");
  net.emplace<MaxPool2d>("", 2);
  net.emplace<Flatten>("");
  net.emplace<Linear>("fc1", std::int64_t{64} * h * w, 512);
  net.emplace<ReLU>("");
  net.emplace<Linear>("fc2", 512, classes);
}

}  // namespace murmur::nn
