// murmur-sim: a simulation of many peers in one process. Each peer is a thread running the
// ordinary runtime::run_peer over the inproc transport, with the data sets loaded once and
// shared, so 256 peers of a small model fit on a laptop. It writes the same run directory as
// murmur-launch (config.yaml, rank<r>/metrics.jsonl, rank<r>/result.json, summary.json), so
// murmur-sweep and its report treat it like any run. Compute is one thread per peer.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/config.h"
#include "core/error.h"
#include "core/files.h"
#include "core/logging.h"
#include "nn/cpu/threads.h"
#include "nn/dataset.h"
#include "runtime/peer.h"
#include "runtime/summary.h"
#include "transport/inproc/transport.h"

namespace {

using namespace murmur;

struct Outcome {
  runtime::PeerResult result;
  std::string error;  // empty: the peer finished
};

// Runs the N peers as threads and returns each one's outcome, rank r at index r. A peer that
// throws drops its transport on the way out, so its neighbors see PeerLost instead of hanging.
std::vector<Outcome> simulate(const ExperimentConfig& config, const std::filesystem::path& out) {
  const int n = config.world.size;
  auto train = std::make_shared<const nn::Dataset>(nn::load_dataset(config.data, config.run.seed, true));
  auto test = std::make_shared<const nn::Dataset>(nn::load_dataset(config.data, config.run.seed, false));
  auto transports = transport::inproc::make_world(n);
  std::vector<Outcome> outcomes(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    std::shared_ptr<transport::Transport> mine(std::move(transports[static_cast<std::size_t>(r)]));
    threads.emplace_back([&, r, mine = std::move(mine)]() mutable {
      ExperimentConfig own = config;
      own.world.rank = r;
      runtime::PeerOptions options;
      options.out = out;
      options.local_peers = n;
      options.transport = std::move(mine);
      options.train = train;
      options.test = test;
      options.install_signal_handlers = false;
      Outcome& o = outcomes[static_cast<std::size_t>(r)];
      try {
        o.result = runtime::run_peer(own, options);
      } catch (const std::exception& e) {
        o.error = e.what();
        o.result.rank = r;
      }
    });
  }
  for (auto& t : threads) t.join();
  return outcomes;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"murmur-sim: many peers as threads of one process (inproc transport)"};
  std::string config_file;
  std::vector<std::string> overrides;
  std::string out;
  int peers = 0;
  std::string log_level = "warn";
  app.add_option("-n,--peers", peers, "number of peers (default: the config's world.size)");
  app.add_option("-c,--config", config_file, "YAML config")->required();
  app.add_option("--set", overrides, "override a config key: --set train.epochs=3")
      ->allow_extra_args(false);
  app.add_option("-o,--out", out, "run directory (default: runs/<run.name>)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn (default), error");
  CLI11_PARSE(app, argc, argv);

  const auto start = std::chrono::steady_clock::now();
  try {
    ExperimentConfig config = load_config(config_file);
    for (const auto& o : overrides) apply_override(config, o);
    if (peers > 0) config.world.size = peers;
    config.world.rank = -1;
    config.transport.backend = "inproc";
    config.run.threads = 1;  // one compute thread per peer: the peers are the parallelism
    // Threads of one process share one cgroup: a CPU quota cannot single one out.
    if (!config.network.stragglers.empty() && config.network.straggler_mode == "quota") {
      std::fprintf(stderr, "murmur-sim: network.stragglers: the peers are threads of one process, "
                           "so stragglers sleep (network.straggler_mode: sleep)\n");
      config.network.straggler_mode = "sleep";
    }
    runtime::check_config(config);
    init_logging("sim", log_level);
    // Process-wide: set once here; each run_peer sets the same value again (threads = 1).
    nn::cpu::set_compute_threads(1);
    const std::filesystem::path dir = !out.empty() ? out : !config.run.out.empty() ? config.run.out
                                                                                   : "runs/" + config.run.name;
    std::filesystem::create_directories(dir);
    atomic_write_file(dir / "config.yaml", to_yaml(config));
    runtime::write_json(dir / "config.json", to_json(config));

    const std::vector<Outcome> outcomes = simulate(config, dir);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::vector<runtime::PeerResult> results;
    int failed = 0;
    for (const Outcome& o : outcomes) {
      const auto result_file = dir / fmt::format("rank{}", o.result.rank) / "result.json";
      if (!o.error.empty()) {
        std::fprintf(stderr, "murmur-sim: peer %d: error: %s\n", o.result.rank, o.error.c_str());
        ++failed;
        std::error_code ec;  // an earlier run's result: the summary must list this peer as failed
        std::filesystem::remove(result_file, ec);
        continue;
      }
      runtime::write_json(result_file, runtime::peer_json(o.result));
      results.push_back(o.result);
    }
    // A thread has no exit status: a failed peer's "exit" is null.
    runtime::write_summary(dir, runtime::summarize_run(dir, config, wall, {}));
    double acc_min = 1, acc_max = 0, average = -1, distance = 0;
    for (const auto& r : results) {
      acc_min = std::min(acc_min, r.test_accuracy);
      acc_max = std::max(acc_max, r.test_accuracy);
      if (r.has_average) average = r.average_test_accuracy, distance = r.consensus_distance;
    }
    std::printf("murmur-sim: %d peers, %.1fs", config.world.size, wall);
    if (!results.empty()) std::printf(", peer test accuracy %.2f-%.2f%%", 100 * acc_min, 100 * acc_max);
    if (average >= 0) std::printf(", average model %.2f%%, consensus distance %.4g", 100 * average, distance);
    std::printf("\nmurmur-sim: results in %s\n", dir.c_str());
    if (failed > 0) {
      std::fprintf(stderr, "murmur-sim: %d of %d peers failed\n", failed, config.world.size);
      return 1;
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "murmur-sim: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "murmur-sim: unexpected error: %s\n", e.what());
    return 1;
  }
}
