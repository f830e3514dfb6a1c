// The shared setup of the fault tests (faults_test.cc, faults_backends_test.cc): the small
// synthetic task, its run directory, murmur-launch of 4 peers in continue mode, and a wait for a
// peer that kills itself.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
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

// The backends this build has: tcp, and ucx and ofi where built.
inline std::vector<std::string> backends() {
  std::vector<std::string> b{"tcp"};
#ifdef MURMUR_WITH_UCX
  b.push_back("ucx");
#endif
#ifdef MURMUR_WITH_OFI
  b.push_back("ofi");
#endif
  return b;
}

// ucx and ofi, those this build has: the backends whose rejoin goes through the bootstrap.
inline std::vector<std::string> rdma_backends() {
  std::vector<std::string> b = backends();
  std::erase(b, "tcp");
  return b;
}

inline nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

// Waits (up to 60 s) until the processes of `ranks` have started and then ended: the launcher
// started them with MURMUR_FAULT_KILL, so they SIGKILL themselves at a known step
// (runtime/fault_injection.h). Watched together: one may die while another is waited for.
inline void wait_until_dead(const std::filesystem::path& out, std::vector<int> ranks) {
  std::vector<bool> seen(ranks.size(), false);
  for (int i = 0; i < 1200 && !ranks.empty(); ++i) {
    for (std::size_t k = 0; k < ranks.size();) {
      // "[-]" keeps the pattern from matching the shell that runs pgrep itself.
      const std::string alive = "pgrep -f -- '[-]-out " + out.string() + " --rank " +
                                std::to_string(ranks[k]) + " '";
      const bool running = run_command(alive, 10).exit_code == 0;
      if (running) seen[k] = true;
      if (seen[k] && !running) {
        ranks.erase(ranks.begin() + static_cast<std::ptrdiff_t>(k));
        seen.erase(seen.begin() + static_cast<std::ptrdiff_t>(k));
      } else {
        ++k;
      }
    }
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
// (the fault to inject) before it and `sets` after the config, killed after `timeout_s`.
inline murmur::testing::CommandResult launch4(const std::string& env, const std::filesystem::path& config,
                                       const std::string& sets, const std::filesystem::path& out,
                                       int timeout_s = 150) {
  return run_command("env " + env + " " + std::string(MURMUR_SOURCE_DIR) +
                     "/tools/murmur-launch --peer " + binary("murmur-peer") + " -n 4 " +
                     config.string() + " " + sets + " --out " + out.string() + " --keep-going",
                     timeout_s);
}

// Rank 2 of 4 SIGKILLs itself after step 300 (its checkpoint of step 300 written) and is
// restarted with the same command once it is gone; it must be taken back, train to the end and
// be in the final average. `algorithm` is a value of algorithm.name (and more --set after it).
// `epochs` (32 steps each) must outlast the restart by far, and fit `timeout_s` when loaded.
struct RejoinRun {
  nlohmann::json summary;      // summary.json
  std::string restart_output;  // the restarted rank 2's log
};

// With `second_dead` (a rank), that rank is killed too, at the same step, and stays dead: the
// restarted rank 2 meets the other two and rejoins; what the final average holds is left to the
// caller.
// Every step of every peer takes `step_ms` at least (MURMUR_FAULT_STEP_MS), so that the join
// step, the answerers' fastest pace times a peer timeout ahead (membership/rejoin.h), falls
// inside the run whatever the machine's load: at 4 ms, some hundreds of steps past the restart,
// in a run of 100 epochs (3200 steps, 13 s at least). Unfloored, ofi and ucx ran 2000 steps/s
// and more when idle, and the join step lay 4600-14000 steps ahead, past the end of runs sized
// in hundreds of epochs; then the restarted rank trained alone to the end.
inline RejoinRun check_rejoin(const std::string& algorithm, const std::string& backend,
                              int epochs = 100, int timeout_s = 150, int second_dead = -1,
                              int step_ms = 4) {
  const SyntheticRun run;
  const auto& config = run.config;
  const auto& out = run.out;
  // The restarted peer is started by hand, as a user would on one host: MURMUR_LOCAL_SIZE says
  // the whole world is here, so transport.host: auto keeps it on loopback like the others.
  const std::string floor = step_ms > 0 ? "MURMUR_FAULT_STEP_MS=" + std::to_string(step_ms) + " " : "";
  const std::string secret = "env MURMUR_SECRET=faults-test-secret MURMUR_LOCAL_SIZE=4 " + floor;
  // Long enough that the others are still training when rank 2, killed after step 300, has
  // been restarted: a restart takes a second or two.
  const std::string sets = " --set algorithm.name=" + algorithm + " --set train.epochs=" +
                           std::to_string(epochs) + " --set transport.backend=" + backend;
  const int steps = epochs * 32;
  std::string restart_output;
  int restart_code = -1;
  std::string kill = "2:300";
  if (second_dead >= 0) kill.append(",").append(std::to_string(second_dead)).append(":300");
  std::thread killer([&] {
    wait_until_dead(out, second_dead >= 0 ? std::vector<int>{2, second_dead} : std::vector<int>{2});
    auto r = run_command(secret + binary("murmur-peer") + " --out " + out.string() +
                         " --rank 2 --world-size 4 --config " + config.string() +
                         " --set transport.rendezvous_dir=" + (out / "rendezvous").string() + sets +
                         " --set run.on_peer_failure=continue", timeout_s);
    restart_output = r.output;
    restart_code = r.exit_code;
  });
  auto r = launch4(floor + "MURMUR_SECRET=faults-test-secret MURMUR_FAULT_KILL=" + kill, config, sets,
                   out, timeout_s);
  killer.join();
  INFO(r.output << "\n--- restarted rank 2 ---\n" << restart_output);
  CHECK(restart_code == 0);
  CHECK_THAT(restart_output, Catch::Contains("rejoined at step"));
  CHECK_THAT(r.output, Catch::Contains("rank 2 rejoins from step"));
  // A run that went wrong may lack fields: REQUIRE them rather than read what is not there.
  const auto mine = read_json(out / "rank2" / "result.json");
  REQUIRE((mine.contains("steps") && mine.contains("test_accuracy")));
  CHECK(mine["steps"] == steps);
  CHECK(mine["test_accuracy"].get<double>() > 0.8);
  const auto summary = read_json(out / "summary.json");
  REQUIRE((summary.contains("peers") && summary.contains("consensus_distance") &&
           summary.contains("average_model")));
  for (const auto& p : summary["peers"]) {
    // Left out of the final average, the restarted rank 2 may end after the launcher wrote the
    // summary: its own result.json, read above, holds its figures.
    if (second_dead < 0 || (p["rank"] != second_dead && p["rank"] != 2)) CHECK(p["steps"] == steps);
  }
  if (second_dead < 0) {
    // All four took part in the final average: rank 2 came back for good.
    CHECK(summary["consensus_distance"].get<double>() < 1e-2);
  }
  CHECK(summary["average_model"]["test_accuracy"].get<double>() > 0.8);
  return {summary, restart_output};
}

// check_rejoin() with configs/choco_topk.yaml's compression on a ring. Each neighbor takes the
// restarted peer back at its own join step, where the two swap their public copies in full
// (optimizers/choco.h): rank 2's log must show both of its neighbors.
inline void check_choco_rejoin(const std::string& backend, int timeout_s = 150) {
  const auto run = check_rejoin(
      "choco --set topology.graph=ring --set algorithm.compressor.name=topk "
      "--set algorithm.compressor.ratio=0.1 --set algorithm.consensus_lr=0.2",
      backend, 100, timeout_s);
  CHECK_THAT(run.restart_output, Catch::Contains("public copies swapped with rank 1"));
  CHECK_THAT(run.restart_output, Catch::Contains("public copies swapped with rank 3"));
}

}  // namespace murmur::testing::faults
