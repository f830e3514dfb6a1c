// The op table's CUDA kernels (device/cuda) against the CPU backend, op by op, within the float32
// tolerance of tests/nn (each comparison prints a "cuda-check:" line for tools/gpu-check).
// [cuda]: skipped without a GPU.
#include <catch2/catch.hpp>

#include <cstdio>

#include "device/cuda/cuda_device.h"
#include "device/cuda/memory.h"
#include "tests/device/ops_check.h"
#include "tests/skip.h"

namespace murmur::device {
namespace {

TEST_CASE("every CUDA op matches the CPU one", "[cuda][device]") {
  if (cuda::device_count() == 0) MURMUR_SKIP("no GPU");
  auto gpu = cuda::make_device(0);
  CHECK_FALSE(gpu->host_memory());
  for (std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{1} << 20}) {
    testing::check_ops(*gpu, n, [n](const std::string& what, std::span<const float> got,
                                    std::span<const float> want) {
      double diff = 0, scale = 0;
      for (std::size_t i = 0; i < got.size(); ++i) {
        diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
        scale = std::max(scale, std::abs(static_cast<double>(want[i])));
      }
      const double error = scale > 0 ? diff / scale : diff;
      std::printf("cuda-check: %-36s n=%-8zu max relative error %.3g\n", what.c_str(), n, error);
      INFO(what << " (n = " << n << "): max relative error " << error);
      CHECK(error < 1e-3);
    });
  }
}

}  // namespace
}  // namespace murmur::device
