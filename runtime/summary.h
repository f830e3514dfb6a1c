// summary.json: the one file a person or a script reads first after a run.
// {"world_size": N, "peers": [{"rank", "test_accuracy", "test_loss", "bytes_sent", "steps"}...],
//  "wall_time_s": t, "config": {...}} (multi-peer runs add the average model and consensus, and
// a run with eval.target_accuracy its "time_to_accuracy"). Pure functions, but for the file I/O.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "runtime/peer.h"

namespace murmur::runtime {

// One eval line of a peer's metrics.jsonl.
struct EvalPoint {
  std::int64_t step = 0;
  double accuracy = 0;
  double time_s = 0;       // since this peer's training started
  double unix_s = 0;       // the same moment on the system clock, shared by all peers; 0 = absent
  std::uint64_t bytes_sent = 0;
};

// Where the slowest peer first reached the target: at the first evaluation step present on every
// rank whose MIN accuracy over the ranks is >= target. time_s is from the earliest peer's
// training start to the last peer's evaluation at that step (system clock, so one clock for all;
// the peers' own time_s where unix_s is absent); bytes_sent is summed over the ranks.
struct TimeToAccuracy {
  double target = 0;
  bool reached = false;
  std::int64_t step = 0;
  double time_s = 0;
  std::uint64_t bytes_sent = 0;
  double accuracy = 0;  // the min over ranks at that step
};

TimeToAccuracy time_to_accuracy(const std::vector<std::vector<EvalPoint>>& per_rank, double target);
// The eval lines of one metrics.jsonl, by step (a resumed run's repeated step: the last wins).
// A missing file gives none; lines cut by a kill are skipped.
std::vector<EvalPoint> read_eval_points(const std::filesystem::path& metrics_file);
// {"target", "step", "time_s", "bytes_sent", "accuracy"}, the last four null when not reached.
nlohmann::json time_to_accuracy_json(const TimeToAccuracy& t);

nlohmann::json peer_json(const PeerResult& r);
// With a run directory and eval.target_accuracy > 0, adds "time_to_accuracy" read from
// run_dir/rank<r>/metrics.jsonl of every peer.
nlohmann::json make_summary(const ExperimentConfig& config, const std::vector<PeerResult>& peers,
                            double wall_time_s, const std::filesystem::path& run_dir = {});
// Writes `value` (indented) to `file` atomically: summary.json, rank<r>/result.json.
void write_json(const std::filesystem::path& file, const nlohmann::json& value);

}  // namespace murmur::runtime
