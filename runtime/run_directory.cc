#include "runtime/run_directory.h"

#include <chrono>
#include <cstdlib>
#include <span>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/files.h"
#include "runtime/summary.h"
#include "transport/world.h"

namespace murmur::runtime {
namespace {

std::filesystem::path rank_dir(const std::filesystem::path& run_dir, int rank) {
  return run_dir / fmt::format("rank{}", rank);
}

// The peers of the final average whose results did not come over the transport may still write
// their result.json into a shared run directory: waits (a bounded while) until each has, so that
// summary.json holds them all.
void wait_for_results(const std::filesystem::path& run_dir, const std::vector<int>& ranks) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (const int r : ranks) {
    const auto file = rank_dir(run_dir, r) / "result.json";
    while (!std::filesystem::exists(file) && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

}  // namespace

std::filesystem::path run_directory(const ExperimentConfig& config, const std::string& out) {
  if (!out.empty()) return out;
  if (!config.run.out.empty()) return config.run.out;
  return "runs/" + config.run.name;
}

void use_launch_rendezvous(ExperimentConfig& config, const std::filesystem::path& run_dir) {
  const auto& t = config.transport;
  if (config.world.size < 2 || t.rendezvous == "hosts" || !t.rendezvous_dir.empty() ||
      !t.peers.empty() || !t.hostfile.empty()) {
    return;
  }
  if (const auto id = transport::launch_id()) {
    config.transport.rendezvous_dir = (run_dir / "rendezvous" / *id).string();
  }
}

void open_run_directory(const ExperimentConfig& config, const std::filesystem::path& run_dir) {
  const int rank = std::max(0, config.world.rank);
  std::filesystem::create_directories(rank_dir(run_dir, rank));
  if (rank == 0) {
    const std::string yaml = to_yaml(config);
    atomic_write_file(run_dir / "config.yaml", std::as_bytes(std::span(yaml.data(), yaml.size())));
    write_json(run_dir / "config.json", to_json(config));
  }
  std::filesystem::remove(rank_dir(run_dir, rank) / "result.json");
}

bool close_run_directory(const ExperimentConfig& config, const std::filesystem::path& run_dir,
                         const PeerResult& result, double wall_time_s) {
  write_json(rank_dir(run_dir, result.rank) / "result.json", peer_json(result));
  // Where the run directory is shared, each gathered result is the same text its own rank writes.
  std::vector<int> missing;
  for (const int r : result.average_ranks) {
    const auto it = result.gathered.find(r);
    if (it == result.gathered.end()) {
      missing.push_back(r);
    } else if (r != result.rank) {
      std::filesystem::create_directories(rank_dir(run_dir, r));
      write_json(rank_dir(run_dir, r) / "result.json", it->second);
    }
  }
  const bool by_launcher = std::getenv("MURMUR_LAUNCHER") != nullptr;
  if (!(config.world.size == 1 || (result.has_average && !by_launcher))) return false;
  wait_for_results(run_dir, missing);
  write_summary(run_dir, summarize_run(run_dir, config, wall_time_s, {}));
  return true;
}

}  // namespace murmur::runtime
