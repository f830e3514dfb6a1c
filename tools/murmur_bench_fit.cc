// murmur-bench fit: the survey's alpha-beta model of each transport on this machine. Runs the
// ring exchange and the ring allreduce of `murmur-bench comm` (every rank sending at once, as
// the algorithms' steps do, and each round started with cold caches, as a step's forward and
// backward leave them) at each size and rank count, fits alpha (seconds per phase) and
// beta (seconds per byte a rank sends in a phase) per backend, rank count and message-size
// band (transport/cost_model.h), prints them with the fit's worst error over its samples, and
// stores them as JSON where the run summaries look for them (runtime/comm_prediction.h).
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/error.h"
#include "tools/bench_comm.h"
#include "tools/bench_registry.h"
#include "transport/collectives.h"
#include "transport/cost_model.h"
#include "transport/factory.h"

namespace murmur::tools {
namespace {

struct FitOptions {
  CommOptions comm;
  std::string out;  // "" = transport::default_cost_model_path()
};

// The samples one row of murmur-bench comm gives the fit: the ring exchange is one phase of a
// message to each ring neighbor; the ring allreduce is 2(N-1) phases of a segment, N of them
// per vector, in pieces of at most chunk_bytes.
transport::CostSample sample_of(const nlohmann::json& row, double chunk_bytes) {
  const double n = row["processes"].get<int>();
  const double bytes = static_cast<double>(row["bytes"].get<std::int64_t>());
  const double seconds = row["seconds"].get<double>();
  if (row["pattern"] == "ring_exchange") {
    const double neighbors = n > 2 ? 2 : 1;
    return {1, bytes, neighbors * bytes, seconds};
  }
  return {2 * (n - 1), std::min(bytes / n, chunk_bytes), bytes / n, seconds};
}

std::string machine() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return fmt::format("{}, {} cores", host, std::thread::hardware_concurrency());
}

int run_fit(FitOptions& o) {
  o.comm.patterns = {"ring_exchange", "allreduce"};
  const std::vector<std::string> backends =
      o.comm.backends.empty() ? transport::process_backends() : split_list(o.comm.backends);
  const std::filesystem::path out = o.out.empty() ? transport::default_cost_model_path() : std::filesystem::path(o.out);
  transport::CostModel model;
  // Keep the fits of other backends and rank counts already in the file.
  std::error_code ec;
  if (std::filesystem::exists(out, ec)) model = transport::read_cost_model(out);
  model.machine = machine();
  std::printf("%-8s %5s %21s %12s %10s %8s %10s\n", "backend", "ranks", "message bytes", "alpha us",
              "Gbit/s", "samples", "max error");
  for (const std::string& backend : backends) {
    for (int n : o.comm.processes) {
      if (n < 2 || static_cast<std::size_t>(n) > transport::kRingMaxRanks) {
        throw murmur::Error(fmt::format("murmur-bench fit: --processes {}: fits are of 2 to {} ranks "
                                "(the ring's range)", n, transport::kRingMaxRanks));
      }
      std::vector<transport::CostSample> samples;
      for (const nlohmann::json& row : comm_rows(backend, n, o.comm)) {
        samples.push_back(sample_of(row, static_cast<double>(o.comm.chunk_bytes)));
      }
      transport::LinkCost link = transport::fit_link(samples, transport::default_band_edges());
      for (const transport::CostBand& b : link.bands) {
        const std::string range = b.max_bytes == 0 ? fmt::format(">= {:.0f}", b.min_bytes)
                                                    : fmt::format("{:.0f}-{:.0f}", b.min_bytes, b.max_bytes);
        const std::string rate =
            b.beta_s_per_byte > 0 ? fmt::format("{:.2f}", 8e-9 / b.beta_s_per_byte) : "-";
        std::printf("%-8s %5d %21s %12.1f %10s %8d %9.1f%%\n", backend.c_str(), n, range.c_str(),
                    b.alpha_s * 1e6, rate.c_str(), b.samples, 100 * b.max_relative_error);
      }
      std::fflush(stdout);
      model.links[backend][n] = std::move(link);
    }
  }
  transport::write_cost_model(out, model);
  std::printf("cost model written to %s\n", out.string().c_str());
  return 0;
}

const RegisterBench kRegister{{
    "fit",
    "fit alpha (latency) and beta (inverse bandwidth) per backend, rank count and message size "
    "from the ring exchange and the ring allreduce; stored as JSON for the runs' predictions",
    [](CLI::App& sub) -> std::function<int()> {
      auto o = std::make_shared<FitOptions>();
      o->comm.sizes = {16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20};
      o->comm.processes = {2, 4};
      o->comm.cold = true;
      add_transfer_options(sub, o->comm, "comma-separated (tcp,ucx,ofi); default: all built");
      sub.add_flag("--cold,!--warm", o->comm.cold,
                   "rounds start with cold caches, as after a training step (default) or warm");
      sub.add_option("--out", o->out,
                     "the JSON file (default: $MURMUR_COST_MODEL, else ~/.cache/murmur/cost_model.json)");
      return [o] { return run_fit(*o); };
    },
}};

}  // namespace
}  // namespace murmur::tools
