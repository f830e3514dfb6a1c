// summary.json: the one file a person or a script reads first after a run, built from the run
// directory alone by summarize_run() for every way a run is made (a lone murmur-peer, murmur-sim,
// murmur-launch through `murmur-peer --summarize`, the sweep's report):
// {"world_size": N, "peers": [rank<r>/result.json without its average, or {"rank", "failed": true,
//  "exit"}], "wall_time_s", "config", "average_model", "consensus_distance", "time_to_accuracy",
//  "comm_prediction" (runtime/comm_prediction.h, where murmur-bench fit has left a cost model)}.
// Pure functions, but for the file I/O; thread-safe for distinct run directories.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "optimizers/averaging.h"
#include "runtime/peer.h"

namespace murmur::runtime {

// Where the slowest peer first reached the target: at the first evaluation step present on every
// rank whose MIN accuracy over the ranks is >= target (a diverged rank, NaN, reaches nothing).
// time_s is from the earliest peer's training start to the last peer's evaluation at that step
// (system clock, so one clock for all; the peers' own time_s where unix_s is absent); bytes_sent
// is summed over the ranks.
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
// A missing file gives none; lines cut by a kill, or without a step, are skipped.
std::vector<EvalPoint> read_eval_points(const std::filesystem::path& metrics_file);
// The "evals" of a result.json (peer_json's), by step; malformed entries are skipped.
std::vector<EvalPoint> result_eval_points(const nlohmann::json& result);
// {"target", "step", "time_s", "bytes_sent", "accuracy"}, the last four null when not reached.
nlohmann::json time_to_accuracy_json(const TimeToAccuracy& t);

// An asynchronous algorithm's report (optimizers/averaging.h) as result.json's "exchanges":
// {"initiator", "made", "lost", "refused", "staleness": [count of exchanges 0, 1, ... steps apart,
// the last bucket also counting more; trailing zeros cut]}.
nlohmann::json exchange_json(const optimizers::ExchangeReport& r);
// The run's "exchanges" from its peers': each exchange once (as its initiator counted it), the
// losses and refusals of every side, and the staleness histogram with its median, 99th
// percentile and largest bucket; null where no peer reported any.
nlohmann::json merge_exchanges(const std::vector<nlohmann::json>& peers);

// One peer's rank<r>/result.json.
nlohmann::json peer_json(const PeerResult& r);
// Returns the object of rank<rank>/result.json in run_dir, or nullopt when it is missing,
// unreadable, not JSON, not for `rank`, or has a field of the wrong type: that peer failed.
std::optional<nlohmann::json> read_peer_result(const std::filesystem::path& run_dir, int rank);

// The summary of these peer entries (results as read_peer_result gives them, or failed entries):
// each result's average_model is taken out of its entry, and the widest (most ranks; of equals,
// the last) becomes the run's average_model, with that peer's consensus_distance. world_size is
// config.world.size. No time_to_accuracy: summarize_run adds it.
nlohmann::json make_summary(const ExperimentConfig& config, const std::vector<nlohmann::json>& peers,
                            double wall_time_s);

// summary.json of the run in run_dir: every rank r < config.world.size from rank<r>/result.json,
// a rank without a valid one as {"rank": r, "failed": true, "exit": exit_codes[r] or null}; and,
// when `target` (else eval.target_accuracy) is > 0, time_to_accuracy over every rank's
// rank<r>/metrics.jsonl (where it is missing or has no evaluations: its result.json's "evals",
// as the gatherer of a run without a shared directory writes them). `target` changes that field only, not the config written.
// With a cost model at transport::default_cost_model_path(), "comm_prediction" too.
nlohmann::json summarize_run(const std::filesystem::path& run_dir, const ExperimentConfig& config,
                             double wall_time_s, const std::map<int, int>& exit_codes,
                             std::optional<double> target = std::nullopt);
// The same with the config the run wrote, read_run_config(run_dir).
nlohmann::json summarize_run(const std::filesystem::path& run_dir, double wall_time_s,
                             const std::map<int, int>& exit_codes,
                             std::optional<double> target = std::nullopt);

// The config a run was started with, run_dir/config.yaml (written with config.json by rank 0 or
// murmur-sim; the YAML one, since only it keeps integer map keys such as network.stragglers').
// Throws ConfigError naming the file.
ExperimentConfig read_run_config(const std::filesystem::path& run_dir);

// What a run directory cannot say about itself: the launcher's wall time and how failed peers
// exited (rank -> exit status; negative: killed by that signal).
struct RunOutcome {
  double wall_time_s = 0;
  std::map<int, int> exit_codes;
};
// The outcome recorded in run_dir/summary.json, to keep when rewriting it (e.g. with another
// target); zero and none where it has no such figures or is missing or unreadable.
RunOutcome recorded_outcome(const std::filesystem::path& run_dir);

// Writes `value` (indented) to `file` atomically: summary.json, rank<r>/result.json.
void write_json(const std::filesystem::path& file, const nlohmann::json& value);
// Writes run_dir/summary.json atomically.
void write_summary(const std::filesystem::path& run_dir, const nlohmann::json& summary);

}  // namespace murmur::runtime
