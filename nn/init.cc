#include "nn/init.h"

#include <cmath>

namespace murmur::nn {

void uniform_(std::span<float> x, double bound, Rng& rng) {
  for (float& v : x) v = static_cast<float>(rng.uniform(-bound, bound));
}

double default_weight_bound(std::int64_t fan_in) {
  // torch.nn.init.kaiming_uniform_(w, a=sqrt(5)): gain = sqrt(2 / (1 + 5)), std = gain /
  // sqrt(fan_in), bound = sqrt(3) * std = 1 / sqrt(fan_in).
  if (fan_in <= 0) return 0.0;
  const double gain = std::sqrt(2.0 / (1.0 + 5.0));
  return std::sqrt(3.0) * gain / std::sqrt(static_cast<double>(fan_in));
}

double default_bias_bound(std::int64_t fan_in) {
  return fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
}

}  // namespace murmur::nn
