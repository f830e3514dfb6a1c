// The "cnn" model of ModelConfig: declared here, implemented in nn/cnn.cc (with the conv,
// pool and batch-norm layers). Model::create calls it on an empty Sequential and builds it.
#pragma once

#include "nn/model.h"
#include "nn/sequential.h"

namespace murmur::nn {

// Appends the LeNet-style CNN to the empty `net`, with the PyTorch module names as layer
// names: conv1 (c -> 32, 5x5, no padding), ReLU, MaxPool2d(2), conv2 (32 -> 64, 5x5), ReLU,
// MaxPool2d(2), Flatten, fc1 (-> 512), ReLU, fc2 (512 -> classes). For 1x28x28 input fc1 is
// 1024 -> 512. Throws ConfigError if the input is too small for two conv+pool stages.
void build_cnn(Sequential& net, Shape3 input, int classes);

}  // namespace murmur::nn
