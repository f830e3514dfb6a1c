// murmur-topo: how fast a topology mixes. Prints the mixing matrix, its second-largest
// eigenvalue modulus, spectral gap and rounds to shrink consensus error 10x, for a config
// (--config run.yaml) or a named graph (--graph ring --peers 8); --json prints one object;
// --dot writes the graph as Graphviz DOT, and a PNG beside it where `dot` is installed;
// --list prints the registered graphs, weights schemes and averaging algorithms (--list --json:
// one object that other tools, the sweep's plots among them, read instead of keeping a list).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/error.h"
#include "optimizers/algorithm.h"
#include "topology/dot.h"
#include "topology/graph.h"
#include "topology/mixing.h"
#include "topology/registry.h"
#include "topology/schedule.h"
#include "topology/spectral.h"

namespace {

using namespace murmur;
using namespace murmur::topology;

struct Options {
  std::string config_file;
  std::vector<std::string> overrides;
  std::string graph;
  std::string weights;
  int peers = 0;
  int k = 0;
  std::uint64_t seed = 0;
  bool seed_given = false;
  std::int64_t first_round = 0;
  int rounds = 0;
  bool json = false;
  bool print_matrix = false;
  bool list = false;
  std::string dot_file;
};

bool sums_to_one(const MixingMatrix& w, Stochastic need) {
  try {
    check_stochastic(w, need, "", 1e-9);
    return true;
  } catch (const ConfigError&) {
    return false;
  }
}

// Searches PATH ourselves rather than asking a shell, so a missing graphviz is not an error.
bool have_program(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string dirs = path;
  for (std::size_t start = 0; start <= dirs.size();) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::filesystem::path candidate = std::filesystem::path(dirs.substr(start, end - start)) / name;
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec)) return true;
    start = end + 1;
  }
  return false;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

void write_dot(const Options& o, const TopologyConfig& topo, int n) {
  const Graph g = graph_at(topo, n, o.seed, o.first_round);
  const MixingMatrix w = mixing_matrix(g, topo);
  const std::string name = fmt::format("{} n={} round {}", topo.graph, n, o.first_round);
  std::ofstream out(o.dot_file, std::ios::binary);
  out << to_dot(g, name, &w);
  if (!out.flush()) throw IoError(fmt::format("{}: cannot write DOT file", o.dot_file));
  if (!have_program("dot")) {
    std::fprintf(stderr, "murmur-topo: wrote %s (no graphviz `dot` on PATH: no PNG)\n",
                 o.dot_file.c_str());
    return;
  }
  const std::string png = std::filesystem::path(o.dot_file).replace_extension(".png").string();
  const std::string cmd = fmt::format("dot -Tpng {} -o {}", shell_quote(o.dot_file), shell_quote(png));
  if (std::system(cmd.c_str()) != 0) throw IoError(fmt::format("`{}` failed", cmd));
  std::fprintf(stderr, "murmur-topo: wrote %s and %s\n", o.dot_file.c_str(), png.c_str());
}

// A graph's directedness when the config cannot change it; nullopt where it can (custom reads
// topology.directed).
std::optional<bool> fixed_directed(const GraphInfo& g) {
  TopologyConfig one_way;
  one_way.directed = true;
  const bool as_default = g.directed(TopologyConfig{});
  if (as_default != g.directed(one_way)) return std::nullopt;
  return as_default;
}

const char* needs_name(optimizers::GraphNeeds needs) {
  switch (needs) {
    case optimizers::GraphNeeds::kNone: return "none";
    case optimizers::GraphNeeds::kAny: return "any";
    case optimizers::GraphNeeds::kDoublyStochastic: return "doubly_stochastic";
    case optimizers::GraphNeeds::kColumnStochastic: return "column_stochastic";
  }
  return "?";
}

const char* rejoin_name(optimizers::RejoinPolicy policy) {
  switch (policy) {
    case optimizers::RejoinPolicy::kNone: return "none";
    case optimizers::RejoinPolicy::kPerPair: return "per_pair";
    case optimizers::RejoinPolicy::kAgreed: return "agreed";
  }
  return "?";
}

int list(const Options& o) {
  if (o.json) {
    nlohmann::json j;
    j["graphs"] = nlohmann::json::array();
    for (const GraphInfo* g : graphs()) {
      const std::optional<bool> directed = fixed_directed(*g);
      j["graphs"].push_back({{"name", g->name},
                             // null: topology.directed decides
                             {"directed", directed ? nlohmann::json(*directed) : nlohmann::json()},
                             {"time_varying", g->time_varying},
                             {"summary", g->summary}});
    }
    j["weights"] = nlohmann::json::array();
    for (const WeightsInfo* w : weights_schemes()) {
      j["weights"].push_back({{"name", w->name}, {"summary", w->summary}});
    }
    j["algorithms"] = nlohmann::json::array();
    for (const optimizers::AlgorithmInfo* a : optimizers::algorithms()) {
      j["algorithms"].push_back({{"name", a->name},
                                 {"summary", a->summary},
                                 {"uses_graph", a->needs != optimizers::GraphNeeds::kNone},
                                 {"needs", needs_name(a->needs)},
                                 {"static_graph_only", a->static_graph_only},
                                 {"overlaps", a->overlaps},
                                 {"compresses", a->compresses},
                                 {"rejoins", rejoin_name(a->rejoins)},
                                 {"device", a->device},
                                 {"keys", std::vector<std::string_view>(a->keys.begin(), a->keys.end())}});
    }
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  for (const GraphInfo* g : graphs()) fmt::print("graph      {:<22} {}\n", g->name, g->summary);
  for (const WeightsInfo* w : weights_schemes()) {
    fmt::print("weights    {:<22} {}\n", w->name, w->summary);
  }
  for (const optimizers::AlgorithmInfo* a : optimizers::algorithms()) {
    fmt::print("algorithm  {:<22} {}\n", a->name, a->summary);
  }
  return 0;
}

int run(const Options& o) {
  ExperimentConfig config;
  if (!o.config_file.empty()) config = load_config(o.config_file);
  for (const auto& s : o.overrides) apply_override(config, s);
  TopologyConfig& topo = config.topology;
  if (!o.graph.empty()) topo.graph = o.graph;
  if (!o.weights.empty()) topo.weights = o.weights;
  if (o.k > 0) topo.k = o.k;
  const int n = o.peers > 0 ? o.peers : config.world.size;
  const std::uint64_t seed = o.seed_given ? o.seed : config.run.seed;
  Options resolved = o;
  resolved.seed = seed;

  validate_world(topo, n);
  const int rounds = o.rounds > 0 ? o.rounds : analysis_window(topo, n);
  const MixingMatrix w = product(topo, n, seed, o.first_round, rounds);
  const auto values = eigenvalues(w);
  const Spectrum s = spectrum_from_slem(values.size() > 1 ? std::abs(values[1]) : 0.0, rounds, n);
  const bool directed = graph_at(topo, n, seed, o.first_round).directed;
  const bool row = sums_to_one(w, Stochastic::kRow);
  const bool column = sums_to_one(w, Stochastic::kColumn);
  if (!o.dot_file.empty()) write_dot(resolved, topo, n);

  if (o.json) {
    nlohmann::json j;
    j["peers"] = n;
    j["graph"] = topo.graph;
    j["weights"] = topo.weights;
    j["directed"] = directed;
    j["time_varying"] = is_time_varying(topo);
    j["period"] = period(topo, n);
    j["seed"] = seed;
    j["first_round"] = o.first_round;
    j["rounds"] = rounds;
    j["second_eigenvalue"] = s.second_eigenvalue;
    j["spectral_gap"] = s.spectral_gap;
    j["per_round"] = s.per_round;
    // Infinity has no JSON spelling: null means "never" (disconnected or periodic).
    j["rounds_to_10x"] = std::isfinite(s.rounds_to_10x)
                             ? nlohmann::json(static_cast<std::int64_t>(s.rounds_to_10x))
                             : nlohmann::json(nullptr);
    j["row_stochastic"] = row;
    j["column_stochastic"] = column;
    nlohmann::json matrix = nlohmann::json::array();
    for (int i = 0; i < n; ++i) {
      std::vector<double> r(w.w.begin() + static_cast<std::ptrdiff_t>(i) * n,
                            w.w.begin() + static_cast<std::ptrdiff_t>(i + 1) * n);
      matrix.push_back(r);
    }
    j["matrix"] = matrix;
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }

  std::printf("graph            %s (%s), %d peers, weights %s\n", topo.graph.c_str(),
              directed ? "directed" : "undirected", n, topo.weights.c_str());
  if (rounds == 1) {
    std::printf("analyzed         W, one round\n");
  } else {
    std::printf("analyzed         P = W(%lld) ... W(%lld), product of %d rounds (%s, seed %llu)\n",
                static_cast<long long>(o.first_round + rounds - 1),
                static_cast<long long>(o.first_round), rounds,
                period(topo, n) > 0 ? "one period" : "a sampled window of random rounds",
                static_cast<unsigned long long>(seed));
  }
  std::printf("stochastic       rows %s, columns %s\n", row ? "sum to 1" : "do NOT sum to 1",
              column ? "sum to 1" : "do NOT sum to 1");
  std::printf("second |eigval|  %.6f\n", s.second_eigenvalue);
  std::printf("spectral gap     %.6f\n", s.spectral_gap);
  if (rounds > 1) std::printf("per-round rate   %.6f\n", s.per_round);
  std::printf("rounds to 10x    %s\n", std::isfinite(s.rounds_to_10x)
                                           ? fmt::format("{}", s.rounds_to_10x).c_str()
                                           : "never (not connected, or periodic)");
  if (o.print_matrix || n <= 16) {
    std::printf("matrix (row i: the weights rank i gives to each rank's value)\n");
    for (int i = 0; i < n; ++i) {
      std::string line = " ";
      for (int j = 0; j < n; ++j) line += fmt::format(" {:6.4f}", w(i, j));
      std::printf("%s\n", line.c_str());
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"murmur-topo: mixing matrix and spectral gap of a topology"};
  Options o;
  app.add_option("--config", o.config_file, "experiment YAML (topology, world.size, run.seed)");
  app.add_option("--set", o.overrides, "override a config key: key.path=value (repeatable)");
  app.add_option("--graph", o.graph,
                 "graph name (ring, torus, hypercube, ...; --list shows every one)");
  app.add_option("--peers", o.peers, "number of peers (default: world.size of the config)")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--weights", o.weights, fmt::to_string(fmt::join(weights_names(), " | ")));
  app.add_option("--k", o.k, "random_kout: out-degree per round")->check(CLI::PositiveNumber);
  auto* seed = app.add_option("--seed", o.seed, "seed of random gossip (default: run.seed)");
  app.add_option("--round", o.first_round, "first round analyzed, and the round drawn by --dot")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--rounds", o.rounds,
                 "rounds in the analyzed product (default: the period, or a sampled window)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--json", o.json, "print one JSON object");
  app.add_flag("--list", o.list,
               "list the registered graphs, weights schemes and algorithms, one line each (with --json: "
               "{\"graphs\": [{name, directed, time_varying, summary}], \"weights\": [...]})");
  app.add_flag("--matrix", o.print_matrix, "print the matrix even when n > 16");
  app.add_option("--dot", o.dot_file, "write the graph as DOT here (and .png if graphviz is on PATH)");
  CLI11_PARSE(app, argc, argv);
  o.seed_given = seed->count() > 0;
  if (o.list) return list(o);
  if (o.config_file.empty() && (o.graph.empty() || o.peers == 0)) {
    std::fprintf(stderr, "murmur-topo: give --config FILE, or --graph NAME --peers N\n");
    return 2;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "murmur-topo: %s\n", e.what());
    return 1;
  }
}
