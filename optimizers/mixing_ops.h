// Weighted sums on flat float arrays, the arithmetic of every averaging algorithm. Plain loops
// over contiguous memory that the compiler vectorizes (-O3 -march=native); the many-input mix
// walks the arrays in cache-sized blocks so each output element is loaded and stored once.
// Pure functions on caller-owned memory; thread-safe for disjoint outputs.
#pragma once

#include <cstddef>
#include <span>

namespace murmur::optimizers {

// x <- self * x + sum_k weights[k] * inputs[k]. Every input has x.size() floats.
void mix(std::span<float> x, float self, std::span<const float* const> inputs,
         std::span<const float> weights);

// y <- y + a * x.
void axpy(std::span<float> y, float a, std::span<const float> x);
// y <- y + a * (u - v).
void add_scaled_diff(std::span<float> y, float a, std::span<const float> u,
                     std::span<const float> v);
// x <- a * x.
void scale(std::span<float> x, float a);
// out <- x (sizes must match).
void copy(std::span<float> out, std::span<const float> x);

// sum_i (x_i - y_i)^2, accumulated in double.
double squared_distance(std::span<const float> x, std::span<const float> y);

}  // namespace murmur::optimizers
