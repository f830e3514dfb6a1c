// murmur-peer: one peer of a run. Rank and world come from flags, the config, or the launcher's
// and schedulers' environment. With no --config it runs the embedded default
// (runtime/default_config.h: 4 peers, D-PSGD on a ring, the MLP on Fashion-MNIST).
// With --summarize RUN_DIR it trains nothing: it writes the run's summary.json (murmur-launch
// and murmur-sweep call it so).
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/config.h"
#include "core/error.h"
#include "core/files.h"
#include "core/logging.h"
#include "core/progress.h"
#include "runtime/default_config.h"
#include "runtime/evaluate.h"
#include "runtime/fault_injection.h"
#include "transport/world.h"
#include "runtime/peer.h"
#include "runtime/run_directory.h"
#include "runtime/stop_signal.h"
#include "runtime/summary.h"

namespace {

// UCX's library constructor installs its own handlers for crash signals (UCX_HANDLE_ERRORS,
// default "bt"), also in runs that use another backend. After heap corruption its handler can
// hang instead of ending the process, and then a launcher waits forever for a dead peer. Unless
// the user asked for UCX's handling explicitly, a crash ends the process as the kernel means it.
void restore_crash_signals() {
  if (std::getenv("UCX_HANDLE_ERRORS") != nullptr) return;
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE}) std::signal(sig, SIG_DFL);
}

// One --exit RANK=CODE of --summarize; throws murmur::Error naming it.
std::pair<int, int> parse_exit(const std::string& text, int world_size) {
  const auto eq = text.find('=');
  const auto number = [&](std::string_view s, int& v) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return !s.empty() && ec == std::errc() && end == s.data() + s.size();
  };
  int rank = 0, code = 0;
  if (eq == std::string::npos || !number(std::string_view(text).substr(0, eq), rank) ||
      !number(std::string_view(text).substr(eq + 1), code)) {
    throw murmur::Error(fmt::format("--exit {}: expected RANK=CODE, e.g. --exit 2=-9", text));
  }
  if (rank < 0 || rank >= world_size) {
    throw murmur::Error(fmt::format("--exit {}: rank {} is not in a world of {}", text, rank, world_size));
  }
  return {rank, code};
}

// --summarize: summary.json of `run_dir` from its result and metrics files, with the run's own
// config (run_dir/config.yaml) unless --config names another. Without --wall-time it keeps the
// wall time and exit codes of the summary.json it replaces (a sweep re-reading a run with another
// target does not know them); --exit adds to those.
void summarize(const std::filesystem::path& run_dir, const std::string& config_file,
               const std::vector<std::string>& overrides, int world, const std::vector<std::string>& exits,
               std::optional<double> wall_time_s, std::optional<double> target) {
  murmur::ExperimentConfig config =
      config_file.empty() ? murmur::runtime::read_run_config(run_dir) : murmur::load_config(config_file);
  for (const auto& o : overrides) murmur::apply_override(config, o);
  if (world > 0) config.world.size = world;
  if (target && !(*target >= 0 && *target <= 1)) {
    throw murmur::Error(fmt::format("--target {}: expected an accuracy in [0, 1]", *target));
  }
  murmur::runtime::RunOutcome outcome;
  if (wall_time_s) {
    outcome.wall_time_s = *wall_time_s;
  } else {
    outcome = murmur::runtime::recorded_outcome(run_dir);
  }
  for (const auto& e : exits) {
    const auto [rank, code] = parse_exit(e, config.world.size);
    outcome.exit_codes[rank] = code;
  }
  murmur::runtime::write_summary(
      run_dir, murmur::runtime::summarize_run(run_dir, config, outcome.wall_time_s, outcome.exit_codes, target));
}

}  // namespace

int main(int argc, char** argv) {
  restore_crash_signals();
  CLI::App app{"murmur-peer: one peer of a decentralized training run"};
  std::string config_file;
  std::vector<std::string> overrides;
  std::string out;
  int rank = -1;
  int world = -1;
  std::string log_level = "info";
  std::string eval_checkpoint;
  app.add_option("-c,--config", config_file, "YAML config (default: the embedded default)");
  app.add_option("--set", overrides, "override a config key: --set train.epochs=3")
      ->allow_extra_args(false);
  app.add_option("-o,--out", out, "run directory (default: run.out, else runs/<run.name>)");
  app.add_option("--rank", rank, "this peer's rank (default: config, MURMUR_RANK, SLURM_PROCID)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--world-size", world, "number of peers")->check(CLI::PositiveNumber);
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error");
  app.add_option("--eval-checkpoint", eval_checkpoint,
                 "evaluate this checkpoint on the config's test set, then exit");
  bool print_config = false;
  app.add_flag("--print-config", print_config,
               "print the resolved config as JSON (after --set) and exit: a dry run");
  std::string summarize_dir;
  std::vector<std::string> exits;
  std::optional<double> wall_time_s, target;
  app.add_option("--summarize", summarize_dir,
                 "write RUN_DIR/summary.json from its rank<r>/result.json and metrics.jsonl, and exit");
  app.add_option("--exit", exits, "with --summarize: how a failed peer exited, RANK=CODE (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--wall-time", wall_time_s,
                 "with --summarize: the run's wall time in seconds (default: the replaced summary's)");
  app.add_option("--target", target,
                 "with --summarize: the target accuracy of time_to_accuracy (default: eval.target_accuracy)");
  CLI11_PARSE(app, argc, argv);
  if (summarize_dir.empty() && (!exits.empty() || wall_time_s || target)) {
    std::fprintf(stderr, "murmur-peer: error: --exit, --wall-time and --target go with --summarize\n");
    return 2;
  }

  const auto start = std::chrono::steady_clock::now();
  try {
    if (!summarize_dir.empty()) {
      summarize(summarize_dir, config_file, overrides, world, exits, wall_time_s, target);
      return 0;
    }
    murmur::ExperimentConfig config =
        config_file.empty()
            ? murmur::load_config_string(murmur::runtime::kDefaultConfig, "<embedded default>")
            : murmur::load_config(config_file);
    for (const auto& o : overrides) murmur::apply_override(config, o);
    if (world > 0) config.world.size = world;
    if (rank >= 0) config.world.rank = rank;
    if (print_config) {
      for (const std::string& warning : murmur::runtime::check_config(config)) {
        std::fprintf(stderr, "murmur-peer: warning: %s\n", warning.c_str());
      }
      std::printf("%s\n", murmur::to_json(config).dump().c_str());
      return 0;
    }
    const auto world_info = murmur::transport::resolve_world(config.world);
    config.world.rank = world_info.rank;
    config.world.size = world_info.size;
    const std::filesystem::path run_dir = murmur::runtime::run_directory(config, out);
    murmur::runtime::use_launch_rendezvous(config, run_dir);
    murmur::validate(config);
    murmur::init_logging(fmt::format("peer {}", config.world.rank), log_level);
    if (!eval_checkpoint.empty()) {
      const auto e = murmur::runtime::evaluate_checkpoint(config, eval_checkpoint);
      std::printf("%s: test accuracy %.2f%%, loss %.4f (%lld samples)\n", eval_checkpoint.c_str(),
                  100 * e.accuracy, e.loss, static_cast<long long>(e.count));
      return 0;
    }

    murmur::runtime::PeerOptions options;
    options.out = run_dir;
    options.interactive = murmur::stderr_is_terminal();
    options.local_peers = murmur::transport::local_size();
    // Fault injection for tests and experiments (MURMUR_FAULT_KILL, MURMUR_FAULT_STALL): read
    // here, at the edge, and handed to the peer as step hooks.
    options.hooks = murmur::runtime::fault_hooks_from_env(config.world.rank);
    if (const char* cgroup = std::getenv("MURMUR_CPU_CGROUP")) options.cpu_cgroup = cgroup;
    // Every peer removes its own result.json of an earlier run before the start, which the
    // peers take together (Distributed::agree_start).
    murmur::runtime::open_run_directory(config, options.out);
    murmur::runtime::PeerResult result = murmur::runtime::run_peer(config, options);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (murmur::runtime::close_run_directory(config, options.out, result, wall)) {
      std::fprintf(stderr, "murmur-peer: results in %s (summary.json, rank<r>/metrics.jsonl, rank<r>/final.safetensors)\n",
                   options.out.c_str());
    }
    if (result.stopped_early) return 128 + murmur::runtime::stop_signal();
    return 0;
  } catch (const murmur::Error& e) {
    std::fprintf(stderr, "murmur-peer: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "murmur-peer: unexpected error: %s\n", e.what());
    return 1;
  }
}
