// The embedded default run: what `murmur-peer` and `murmur-launch` do with no config file.
// 4 peers, D-PSGD on a ring, the MLP 784-512-256-10 on Fashion-MNIST, 5 epochs in total.
#pragma once

#include <string_view>

namespace murmur::runtime {

// YAML over the struct defaults of core/config.h; also printed by `murmur-peer --print-default`.
inline constexpr std::string_view kDefaultConfig = R"(# murmur's embedded default run
run:
  name: default
world:
  size: 4
algorithm:
  name: dpsgd
topology:
  graph: ring
  weights: uniform
)";

}  // namespace murmur::runtime
