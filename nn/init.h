// Parameter initialization as PyTorch's defaults, drawn from murmur::Rng so the same seed gives
// the same bits everywhere (not the same numbers as torch's generator).
#pragma once

#include <cstdint>
#include <span>

#include "core/rng.h"

namespace murmur::nn {

// Fills x with U(-bound, bound) (as float).
void uniform_(std::span<float> x, double bound, Rng& rng);
// kaiming_uniform_(a = sqrt(5)) on a weight with this fan_in: gain = sqrt(2 / (1 + a^2)),
// bound = gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in). The bound torch.nn.Linear/Conv2d use.
double default_weight_bound(std::int64_t fan_in);
// The bias bound of torch.nn.Linear/Conv2d: 1 / sqrt(fan_in) (0 when fan_in is 0).
double default_bias_bound(std::int64_t fan_in);

}  // namespace murmur::nn
