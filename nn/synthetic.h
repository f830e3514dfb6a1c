// A synthetic classification set that needs no files: `classes` Gaussian class centres in
// 1 x height x width, and samples centre + noise * N(0, 1). Deterministic in the seed. Used by
// tests, benchmarks and quick runs; an MLP learns it to high accuracy at the default noise.
#pragma once

#include <cstdint>

#include "core/config.h"
#include "nn/dataset.h"

namespace murmur::nn {

// Train and test splits share the class centres (drawn from `seed` alone) and differ in their
// samples. Labels cycle through the classes (sample i has label i % classes), so every class has
// size/classes samples, give or take one. Centres are N(0, 1) per pixel; no further
// normalization is applied (the data are already centred, with std about sqrt(1 + noise^2)).
Dataset make_synthetic(const SyntheticConfig& config, std::uint64_t seed, bool train);

}  // namespace murmur::nn
