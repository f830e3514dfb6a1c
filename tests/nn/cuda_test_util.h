// Shared by the [cuda] tests: the no-GPU skip, host<->device vectors, and the error measure.
// A test without a device prints "SKIPPED: no GPU" and returns (tests/skip.h), which ctest counts
// as skipped. Each comparison prints a "cuda-check:" line to stdout, which tools/gpu-check
// collects into its table.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/rng.h"
#include "nn/cuda/check.h"
#include "nn/cuda/memory.h"
#include "tests/skip.h"

namespace murmur::nn::cuda::testing {

// Skips the test case where no CUDA device is visible (cudaGetDeviceCount failed or found 0).
// tools/gpu-check looks for "no GPU" in the output.
#define MURMUR_REQUIRE_GPU()                                            \
  do {                                                                  \
    if (::murmur::nn::cuda::device_count() == 0) MURMUR_SKIP("no GPU"); \
  } while (0)

constexpr double kTolerance = 1e-3;  // the bound on float32 relative error

inline std::vector<float> random_vector(std::size_t n, Rng& rng, double lo = -1, double hi = 1) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.uniform(lo, hi));
  return v;
}

inline DeviceBuffer upload(std::span<const float> host) {
  DeviceBuffer d(host.size() * sizeof(float));
  if (!host.empty())
    MURMUR_CUDA_CHECK(cudaMemcpy(d.data(), host.data(), host.size_bytes(), cudaMemcpyHostToDevice));
  // From pageable memory cudaMemcpy may return before the DMA lands, on the legacy stream that
  // the Context's non-blocking stream does not wait for.
  MURMUR_CUDA_CHECK(cudaDeviceSynchronize());
  return d;
}

inline std::vector<float> download(const float* device, std::size_t n) {
  std::vector<float> host(n);
  MURMUR_CUDA_CHECK(cudaDeviceSynchronize());
  if (n > 0)
    MURMUR_CUDA_CHECK(cudaMemcpy(host.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost));
  return host;
}

// max_i |got_i - want_i| / max_i |want_i|: the error relative to the tensor's scale, so
// entries near zero do not blow it up. 0 for two empty or all-zero tensors that agree.
inline double relative_error(std::span<const float> got, std::span<const float> want) {
  REQUIRE(got.size() == want.size());
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
    if (std::isnan(got[i]) != std::isnan(want[i])) return INFINITY;
  }
  return scale > 0 ? diff / scale : diff;
}

// Checks and reports one comparison: "cuda-check: <what> <error>".
inline void expect_close(const std::string& what, std::span<const float> got,
                         std::span<const float> want, double tolerance = kTolerance) {
  const double error = relative_error(got, want);
  std::printf("cuda-check: %-44s max relative error %.3g\n", what.c_str(), error);
  std::fflush(stdout);
  INFO(what << ": max relative error " << error);
  CHECK(error < tolerance);
}

}  // namespace murmur::nn::cuda::testing
