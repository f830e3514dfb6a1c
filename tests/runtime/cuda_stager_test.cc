// The CUDA stager (runtime/cuda_stager.h) against the host stager: the same snapshot, and the
// same mix to float rounding (the kernel may fuse multiply-adds), chunk by chunk and in whole
// pipelined rounds between two ranks (threads over inproc). Skips where no GPU is visible.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>

#include "core/rng.h"
#include "nn/cuda/context.h"
#include "runtime/cuda_stager.h"
#include "runtime/device_gossip.h"
#include "tests/nn/cuda_test_util.h"
#include "tests/transport/backends.h"
#include "transport/inproc/transport.h"

namespace murmur::runtime {
namespace {

using nn::cuda::testing::download;
using nn::cuda::testing::random_vector;
using nn::cuda::testing::relative_error;
using nn::cuda::testing::upload;

constexpr std::size_t kDim = 5000;
constexpr std::size_t kChunkBytes = 1004;  // 251 floats: 20 chunks, the last one 231

// max_i |got_i - want_i| / max_i |want_i|, without Catch (it runs on the ranks' threads).
double scaled_error(std::span<const float> got, std::span<const float> want) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return scale == 0 ? diff : diff / scale;
}

// Writes `values` into neighbor j's slot of `stager`, chunk by chunk, as the network would.
void fill_slot(ChunkStager& stager, std::size_t j, std::span<const float> values) {
  for (std::size_t k = 0; k < stager.layout().count(); ++k) {
    const transport::ByteRange r = stager.in_range(j, k);
    std::memcpy(stager.in_region().bytes().data() + r.offset,
                values.data() + stager.layout().first(k), r.size);
  }
}

TEST_CASE("cuda stager: snapshot and chunked mix match the host stager", "[cuda][gossip]") {
  MURMUR_REQUIRE_GPU();
  auto world = transport::inproc::make_world(1);
  transport::Transport& transport = *world[0];
  Rng rng(5);
  std::vector<float> host = random_vector(kDim, rng);
  const std::vector<float> initial = host;
  const std::vector<float> a = random_vector(kDim, rng), b = random_vector(kDim, rng);
  nn::cuda::Context context(0);
  nn::cuda::DeviceBuffer device = upload(host);

  HostStager reference(transport, host, kChunkBytes);
  CudaStager staged(transport, device.floats(), kDim, context.stream(), kChunkBytes);
  REQUIRE_FALSE(staged.direct());  // inproc moves host memory only
  CHECK(staged.describe() == "pipelined pinned chunks");
  const std::size_t neighbors[] = {0, 1};
  const float weights[] = {0.35f, 0.25f};
  for (ChunkStager* s : std::initializer_list<ChunkStager*>{&reference, &staged}) {
    s->reserve(2);
    fill_slot(*s, 0, a);
    fill_slot(*s, 1, b);
    for (std::size_t k = 0; k < s->layout().count(); ++k) s->start_download(k);
    for (std::size_t k = 0; k < s->layout().count(); ++k) {
      s->wait_download(k);
      s->upload_and_mix(k, neighbors, 0.4f, weights);
    }
    s->finish();
  }
  const auto snapshot = staged.host_snapshot();
  CHECK(std::memcmp(snapshot.data(), initial.data(), kDim * sizeof(float)) == 0);
  const double err = relative_error(download(device.floats(), kDim), host);
  std::printf("cuda-check: cuda stager chunked mix vs host stager: %.3g\n", err);
  CHECK(err < 1e-6);
}

// Two ranks (threads) gossip over inproc with the CUDA stager, then again with the host stager
// from the same start (another round number, so their tags differ): the results agree.
TEST_CASE("cuda stager: a pipelined round matches the host one", "[cuda][gossip]") {
  MURMUR_REQUIRE_GPU();
  ExperimentConfig config;
  config.world.size = 2;
  config.run.device = "cuda";
  config.algorithm.name = "dpsgd";
  config.topology.graph = "complete";
  config.transport.recv_timeout_ms = 20000;
  auto body = [&](transport::testing::RankContext& ctx) {
    Rng rng(Rng(9).fork(static_cast<std::uint64_t>(ctx.rank())));
    std::vector<float> host = random_vector(kDim, rng);
    nn::cuda::Context context(0);
    nn::cuda::DeviceBuffer device = upload(host);
    CudaStager staged(ctx.transport(), device.floats(), kDim, context.stream(), kChunkBytes);
    PipelinedGossip on_device(config, ctx.transport(), staged);
    on_device.round(0);
    HostStager reference(ctx.transport(), host, kChunkBytes);
    PipelinedGossip on_host(config, ctx.transport(), reference);
    on_host.round(1);  // the same mixing (a static graph), other tags
    const double err = scaled_error(download(device.floats(), kDim), host);
    if (ctx.rank() == 0) {
      std::printf("cuda-check: pipelined round, cuda vs host stager: %.3g\n", err);
    }
    MURMUR_CHECK(err < 1e-6);
  };
  namespace tt = transport::testing;
  const auto failures = tt::failures(tt::run_ranks("inproc", 2, body));
  INFO(failures);
  CHECK(failures.empty());
}

}  // namespace
}  // namespace murmur::runtime
