// The Peer: one process of a murmur run. It resolves its config, loads its shard of the data,
// builds the model and the local optimizer, and runs the training loop: local steps, metrics as
// JSON Lines, evaluation every K steps (or each epoch), periodic checkpoints, resume from the
// latest good checkpoint, and a clean stop on SIGINT/SIGTERM after writing one.
// Not thread-safe: one Peer per process.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "nn/dataset.h"
#include "runtime/step_hook.h"
#include "transport/transport.h"

namespace murmur::runtime {

struct PeerOptions {
  std::filesystem::path out;  // the run directory; this peer writes under out/rank<r>/
  bool interactive = false;   // redraw one progress line (a terminal) instead of log lines
  int local_peers = 1;        // peers sharing this machine's cores (threads default to a share)
  // For simulations of many peers in one process (inproc transport, threads): a transport made
  // by the caller instead of one from the config, and data sets loaded once and shared.
  std::shared_ptr<transport::Transport> transport;
  std::shared_ptr<const nn::Dataset> train;
  std::shared_ptr<const nn::Dataset> test;
  bool install_signal_handlers = true;
  // Called around every local step (fault injection; run_peer adds network.stragglers' own).
  StepHooks hooks;
  // The cgroup murmur-launch put this peer in ($MURMUR_CPU_CGROUP; network.stragglers in quota
  // mode), whose CPU quota a straggler's window switches. Empty: none.
  std::filesystem::path cpu_cgroup;
};

// One evaluation of a peer's model: an eval line of its metrics.jsonl, an entry of its
// result.json's "evals".
struct EvalPoint {
  std::int64_t step = 0;
  double accuracy = 0;
  double time_s = 0;       // since this peer's training started
  double unix_s = 0;       // the same moment on the system clock, shared by all peers; 0 = absent
  std::uint64_t bytes_sent = 0;
};

struct PeerResult {
  int rank = 0;
  int world_size = 1;
  std::int64_t steps = 0;
  std::uint64_t parameters = 0;  // floats in the parameter arena (the cost model's model size)
  double epochs = 0;
  double test_accuracy = 0;
  double test_loss = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  double wall_time_s = 0;
  bool stopped_early = false;  // SIGINT/SIGTERM: a checkpoint was written, training not finished
  std::string backend;         // transport backend, "" for a lone peer
  // Multi-peer runs: the exact mean of all peers' final models (continue mode: of those alive
  // at the end, average_ranks), evaluated by the lowest of them only (the others leave
  // has_average false), and the mean distance of the peers to it.
  bool has_average = false;
  std::vector<int> average_ranks;
  double average_test_accuracy = 0;
  double average_test_loss = 0;
  double consensus_distance = 0;
  double compute_s = 0, comm_s = 0, wait_s = 0;
  std::vector<EvalPoint> evals;  // this run's evaluations (a resumed run's since the resume)
  // An asynchronous algorithm's exchanges (summary.h's exchange_json), else null.
  nlohmann::json exchanges;
  // At the lowest rank of the final average only: every averaged rank's result.json (its own
  // too), gathered over the transport (result_gather.h); the other ranks, and simulations
  // (PeerOptions::transport), leave it empty.
  std::map<int, nlohmann::json> gathered;
};

// The compute threads of a peer (OpenBLAS's and murmur's own pool): run.threads, else its share
// of this machine's cores with `local_peers` peers on it.
int default_threads(const RunConfig& run, int local_peers);

// Every check a config can get before a peer starts: core's field and cross-field rules, the
// device, and the algorithm's (the registry's: a graph it can run on, keys it reads). Throws
// ConfigError. Returns warnings: algorithm keys set that the algorithm does not read.
std::vector<std::string> check_config(const ExperimentConfig& config);

// Trains as the config says and returns this peer's final figures. Throws murmur::Error (config,
// data, checkpoint, transport) with a message naming what and where.
PeerResult run_peer(const ExperimentConfig& config, const PeerOptions& options);

}  // namespace murmur::runtime
