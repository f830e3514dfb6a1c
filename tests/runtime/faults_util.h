// The shared setup of the fault tests (faults_test.cc, faults_backends_test.cc): the small
// synthetic task, its run directory, murmur-launch of 4 peers in continue mode, and a wait for a
// peer that kills itself.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/runtime/test_util.h"

namespace murmur::testing::faults {

inline const char* kSyntheticYaml = R"(run: {threads: 1, log_every: 50}
data:
  name: synthetic
  synthetic: {train_size: 4096, test_size: 1024, noise: 2.5, height: 8, width: 8}
model: {hidden: [32]}
train: {epochs: 40, batch_size: 32}
checkpoint: {every_steps: 100}
transport: {connect_timeout_ms: 20000, recv_timeout_ms: 20000, peer_timeout_ms: 2000}
)";
constexpr int kSteps = 40 * 32;  // epochs x (4096 / 4 peers / 32 per batch)

inline nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

// Waits (up to 60 s) until the process of `rank` has started and then ended: the launcher started
// it with MURMUR_FAULT_KILL, so it SIGKILLs itself at a known step (runtime/fault_injection.h).
inline void wait_until_dead(const std::filesystem::path& out, int rank) {
  // "[-]" keeps the pattern from matching the shell that runs pgrep itself.
  const std::string alive = "pgrep -f -- '[-]-out " + out.string() + " --rank " + std::to_string(rank) + " '";
  bool seen = false;
  for (int i = 0; i < 1200; ++i) {
    const bool running = run_command(alive, 10).exit_code == 0;
    if (running) seen = true;
    if (seen && !running) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// A fresh directory holding the synthetic task's config, and where the run goes.
struct SyntheticRun {
  SyntheticRun() { std::ofstream(config) << kSyntheticYaml; }
  TempDir dir;
  std::filesystem::path config = dir.path() / "synthetic.yaml";
  std::filesystem::path out = dir.path() / "run";
};

// murmur-launch of 4 peers on the synthetic task in continue mode (--keep-going), with `env`
// (the fault to inject) before it and `sets` after the config.
inline murmur::testing::CommandResult launch4(const std::string& env, const std::filesystem::path& config,
                                       const std::string& sets, const std::filesystem::path& out) {
  return run_command("env " + env + " " + std::string(MURMUR_SOURCE_DIR) +
                     "/tools/murmur-launch --peer " + binary("murmur-peer") + " -n 4 " +
                     config.string() + " " + sets + " --out " + out.string() + " --keep-going",
                     150);
}

}  // namespace murmur::testing::faults
