#include "tests/optimizers/consensus_util.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/rng.h"
#include "optimizers/averaging.h"
#include "optimizers/device_arrays.h"
#include "tests/time_scale.h"
#include "transport/factory.h"
#include "tests/transport/backends.h"
#include "topology/spectral.h"
#include "transport/factory.h"

namespace murmur::optimizers::testing {

namespace tt = transport::testing;

std::vector<float> initial_vector(std::uint64_t seed, int rank, std::size_t dim) {
  Rng rng = Rng(seed).fork(static_cast<std::uint64_t>(rank));
  std::vector<float> x(dim);
  for (auto& v : x) v = static_cast<float>(rng.normal());
  return x;
}

std::vector<std::string> process_backends_for_tests() {
  std::vector<std::string> out;
  for (const auto& b : transport::process_backends()) {
    if (b == "tcp" || b == "ucx") out.push_back(b);
  }
  return out;
}

double slem(const TopologyConfig& topology, int n, std::uint64_t seed) {
  return topology::analyze(topology::mixing_at(topology, n, seed, 0)).second_eigenvalue;
}

TopologyConfig graph(const std::string& name, const std::string& weights, int k) {
  TopologyConfig c;
  c.graph = name;
  c.weights = weights;
  c.k = k;
  return c;
}

AlgorithmConfig algorithm(const std::string& name) {
  AlgorithmConfig c;
  c.name = name;
  return c;
}

ConsensusResult run_consensus(const ConsensusRun& run) {
  char dir_template[] = "/tmp/murmur-consensus-XXXXXX";
  const std::string dir = ::mkdtemp(dir_template);
  const std::size_t d = run.dim;
  auto body = [&](tt::RankContext& ctx) {
    const int n = ctx.size(), r = ctx.rank();
    std::vector<double> mean(d, 0.0);
    for (int q = 0; q < n; ++q) {
      auto x = initial_vector(run.seed, q, d);
      for (std::size_t i = 0; i < d; ++i) mean[i] += x[i] / n;
    }
    std::vector<float> params = initial_vector(run.seed, r, d), model(d);
    TransportConfig tc;
    tc.recv_timeout_ms = murmur::testing::scaled_ms(30000);
    tc.chunk_bytes = 4096;  // several pieces per staged message
    auto offhost = device::make_offhost_cpu();
    device::Device& dev = run.offhost ? *offhost : device::cpu();
    auto built = build_averaging(ctx.transport(), dev, run.algorithm, run.topology, tc, params,
                                 run.seed);
    Averaging* averaging = built.averaging.get();
    auto distance = [&] {
      std::span<const float> z = averaging->debiased(model) ? std::span<const float>(model)
                                                            : std::span<const float>(params);
      double s = 0;
      for (std::size_t i = 0; i < d; ++i) s += (z[i] - mean[i]) * (z[i] - mean[i]);
      return s;
    };
    std::vector<double> out{distance()};
    for (int t = 1; t <= run.rounds; ++t) {
      if (run.pause.count() > 0) std::this_thread::sleep_for(run.pause);
      averaging->after_step(t);
      out.push_back(distance());
    }
    averaging->finish();  // flush(); an asynchronous algorithm also ends its exchanges
    out.push_back(distance());
    std::span<const float> z =
        averaging->debiased(model) ? std::span<const float>(model) : std::span<const float>(params);
    std::ofstream f(fmt::format("{}/rank{}", dir, r), std::ios::binary);
    f.write(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(double));
    f.write(reinterpret_cast<const char*>(z.data()), d * sizeof(float));
  };
  tt::RunOptions options;
  options.timeout = std::chrono::seconds(100);
  options.configure = [](TransportConfig&, int) {
    // Loopback for UCX (children only: configure runs after the fork).
    ::setenv("UCX_TLS", "tcp,self", 1);
    ::setenv("UCX_NET_DEVICES", "lo", 1);
  };
  ConsensusResult result;
  result.failures = tt::failures(tt::run_ranks(run.backend, run.ranks, body, options));
  result.error.assign(run.rounds + 1, 0.0);
  std::vector<float> z0(d), z(d);
  for (int r = 0; r < run.ranks && result.failures.empty(); ++r) {
    std::ifstream f(fmt::format("{}/rank{}", dir, r), std::ios::binary);
    std::vector<double> e(run.rounds + 2);
    f.read(reinterpret_cast<char*>(e.data()), e.size() * sizeof(double));
    f.read(reinterpret_cast<char*>((r == 0 ? z0 : z).data()), d * sizeof(float));
    if (!f) result.failures += fmt::format("rank {}: no result file\n", r);
    for (int t = 0; t <= run.rounds; ++t) result.error[t] += e[t];
    result.flushed += e[run.rounds + 1];
    for (std::size_t i = 0; r > 0 && i < d; ++i) {
      result.spread = std::max<double>(result.spread, std::fabs(z[i] - z0[i]));
    }
  }
  for (auto& e : result.error) e = std::sqrt(e);
  result.flushed = std::sqrt(result.flushed);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return result;
}

BuiltAveraging build_averaging(transport::Transport& transport, device::Device& device,
                               const AlgorithmConfig& algorithm, const TopologyConfig& topology,
                               const TransportConfig& transport_config, std::span<float> params,
                               std::uint64_t seed, membership::LiveSet* live,
                               int ranks_per_node) {
  BuiltAveraging b;
  transport::Transport* t = &transport;
  if (!device.host_memory()) {
    b.staging = std::make_unique<StagingTransport>(
        transport, device, static_cast<std::size_t>(transport_config.chunk_bytes));
    t = b.staging.get();
  }
  b.ops = std::make_unique<DeviceFloatOps>(device);
  const auto options = transport::collective_options(transport_config);
  b.hood = live ? membership::live_neighborhood(*t, *live, options, *b.ops)
                : membership::strict_neighborhood(*t, options, *b.ops);
  b.region = register_array(*t, device, params);
  AveragingContext ctx{algorithm, topology, transport_config, *b.hood, device, params, *b.region, seed};
  ctx.ranks_per_node = ranks_per_node;
  b.averaging = make_averaging(ctx);
  return b;
}

}  // namespace murmur::optimizers::testing
