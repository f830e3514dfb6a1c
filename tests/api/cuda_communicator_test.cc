// murmur/murmur.h with CUDA memory: a program's parameters and primitives' buffers on the GPU
// give what the same floats give on the host (built with CUDA only; skipped without a GPU;
// tools/gpu-check runs it where one is lent).
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "api/murmur/murmur.h"
#include "tests/api/peers.h"
#include "tests/runtime/test_util.h"
#include "tests/skip.h"

namespace {

using murmur::Buffer;
using murmur::Communicator;

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

void require(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

// `host` copied to a fresh device buffer (the peer's process ends before it would be freed).
Buffer on_gpu(const std::vector<float>& host) {
  float* d = nullptr;
  require(cudaMalloc(reinterpret_cast<void**>(&d), host.size() * sizeof(float)) == cudaSuccess, "cudaMalloc");
  require(cudaMemcpy(d, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess, "upload");
  return {d, host.size(), murmur::Memory::kCuda, 0};
}

std::vector<float> to_host(const Buffer& b) {
  std::vector<float> host(b.count);
  require(cudaMemcpy(host.data(), b.data, b.count * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess, "download");
  return host;
}

// The run the test does on one kind of memory: a ring of 3, 20 steps of D-PSGD, then the
// primitives; returns what rank 0 ends with, flattened.
std::vector<float> ring_run(Communicator& comm, bool gpu) {
  const int r = comm.rank();
  std::vector<float> x(4099);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.01f * i + r);
  Buffer params = gpu ? on_gpu(x) : Buffer{x.data(), x.size()};
  comm.attach(std::vector<Buffer>{params});
  for (int step = 1; step <= 20; ++step) comm.after_step(step);
  std::vector<float> y = {static_cast<float>(r), 2.0f * r};
  Buffer ys = gpu ? on_gpu(y) : Buffer{y.data(), y.size()};
  comm.allreduce(ys);
  comm.neighbor_average(ys);
  std::vector<float> out = gpu ? to_host(params) : x;
  const std::vector<float> ys_host = gpu ? to_host(ys) : y;
  out.insert(out.end(), ys_host.begin(), ys_host.end());
  comm.average();
  comm.finish();
  return out;
}

}  // namespace

TEST_CASE("api: parameters and primitives on a GPU give the host's results", "[api][cuda]") {
  if (!have_gpu()) MURMUR_SKIP("no GPU");
  std::vector<std::vector<float>> results(2);
  for (const bool gpu : {false, true}) {
    murmur::testing::TempDir dir;
    const auto errors = murmur::testing::run_peers(3, "algorithm: {name: dpsgd}\n", dir.path(),
                                                   [gpu, &dir](Communicator& comm) {
      const std::vector<float> got = ring_run(comm, gpu);
      if (comm.rank() != 0) return;
      FILE* f = std::fopen((dir.path() / (gpu ? "gpu.bin" : "cpu.bin")).c_str(), "wb");
      std::fwrite(got.data(), sizeof(float), got.size(), f);
      std::fclose(f);
    });
    REQUIRE(murmur::testing::failed(errors) == "");
    FILE* f = std::fopen((dir.path() / (gpu ? "gpu.bin" : "cpu.bin")).c_str(), "rb");
    REQUIRE(f != nullptr);
    std::vector<float>& mine = results[gpu ? 1 : 0];
    mine.resize(4099 + 2);
    REQUIRE(std::fread(mine.data(), sizeof(float), mine.size(), f) == mine.size());
    std::fclose(f);
  }
  double worst = 0;
  for (std::size_t i = 0; i < results[0].size(); ++i) {
    worst = std::max(worst, std::abs(double(results[0][i]) - results[1][i]) / (1e-6 + std::abs(double(results[0][i]))));
  }
  std::printf("api on cuda: max relative difference to the host %.3g\n", worst);
  CHECK(worst < 1e-5);
}
