// The registry of averaging algorithms (algorithm.h): one line per algorithm below. Its order
// numbers the algorithms' tag purposes, so every peer of a run must be the same build.
#include <algorithm>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/names.h"
#include "optimizers/adpsgd.h"
#include "optimizers/algorithm.h"
#include "optimizers/allreduce.h"
#include "optimizers/choco.h"
#include "optimizers/diloco.h"
#include "optimizers/dpsgd.h"
#include "optimizers/easgd.h"
#include "optimizers/hierarchical.h"
#include "optimizers/local_sgd.h"
#include "optimizers/no_averaging.h"
#include "optimizers/pairwise.h"
#include "optimizers/sgp.h"
#include "optimizers/wire.h"
#include "topology/mixing.h"
#include "topology/schedule.h"
#include "transport/tag.h"

namespace murmur::optimizers {
namespace {

const AlgorithmInfo* const kAlgorithms[] = {
    &kNoAveraging, &kAllreduce, &kDpsgd, &kSgp,      &kAdpsgd,
    &kLocalSgd,    &kDiloco,    &kChoco, &kPairwise, &kEasgd,
};
static_assert(std::size(kAlgorithms) <= transport::purpose::kCount - transport::purpose::kFirstAlgorithm);

[[maybe_unused]] const bool kRegistered = register_names("algorithm.name", [] {
  std::vector<std::string_view> names;
  for (const AlgorithmInfo* a : kAlgorithms) names.push_back(a->name);
  return names;
}());

std::string names_where(bool (*pred)(const AlgorithmInfo&)) {
  std::string out;
  for (const AlgorithmInfo* a : kAlgorithms) {
    if (!pred(*a)) continue;
    out += (out.empty() ? "" : ", ") + std::string(a->name);
  }
  return out;
}

// Checks the first rounds of the schedule (a whole period of one_peer_exponential, a sample of
// random gossip): enough to catch a graph whose weights can never have the needed sums.
void check_schedule(const AlgorithmConfig& a, const TopologyConfig& topology, int n,
                    std::uint64_t seed, topology::Stochastic need, const char* why) {
  const int rounds = topology::is_time_varying(topology) ? 4 : 1;
  for (int t = 0; t < rounds; ++t) {
    topology::check_stochastic(
        topology::mixing_at(topology, n, seed, t), need,
        fmt::format("algorithm.name={} needs {}: topology.graph={} weights={} round {}", a.name,
                    why, topology.graph, topology.weights, t));
  }
}

}  // namespace

std::span<const AlgorithmInfo* const> algorithms() { return kAlgorithms; }

const AlgorithmInfo& find_algorithm(std::string_view name) {
  for (const AlgorithmInfo* a : kAlgorithms) {
    if (a->name == name) return *a;
  }
  throw ConfigError(fmt::format("algorithm.name: unknown algorithm '{}' (known: {})", name,
                                names_where([](const AlgorithmInfo&) { return true; })));
}

RejoinPolicy rejoin_policy(const AlgorithmConfig& algorithm) {
  // Bounded staleness keeps receives posted rounds ahead for its neighbors, a window a
  // restarted peer cannot be fitted into: a lost neighbor stays lost.
  if (algorithm.max_staleness > 0) return RejoinPolicy::kNone;
  // One-sided windows are keyed once, at start (put_windows.h): a restarted peer's new window
  // is unknown to its neighbors.
  if (algorithm.one_sided) return RejoinPolicy::kNone;
  return find_algorithm(algorithm.name).rejoins;
}

unsigned purpose_of(const AlgorithmInfo& info) {
  const auto it = std::find(std::begin(kAlgorithms), std::end(kAlgorithms), &info);
  if (it == std::end(kAlgorithms)) throw Error(fmt::format("algorithm {} is not registered", info.name));
  return transport::purpose::kFirstAlgorithm + static_cast<unsigned>(it - std::begin(kAlgorithms));
}

std::vector<std::string> check_algorithm(const AlgorithmConfig& a, const TopologyConfig& topology,
                                         int world_size, std::uint64_t seed) {
  const AlgorithmInfo& info = find_algorithm(a.name);
  if (a.compressor.name != CompressorConfig{}.name && !info.compresses) {
    throw ConfigError(fmt::format(
        "algorithm.compressor.name: {} needs an algorithm that compresses ({}), not {}",
        a.compressor.name, names_where([](const AlgorithmInfo& i) { return i.compresses; }),
        a.name));
  }
  const bool gradients = a.average == "gradients";
  if (gradients && a.name != "allreduce") {
    throw ConfigError(fmt::format("algorithm.average: gradients is allreduce's (as DDP); {} "
                                  "averages parameters", a.name));
  }
  // allreduce averaging gradients overlaps backward rather than the next step.
  if (a.overlap && !info.overlaps && !(gradients && a.name == "allreduce")) {
    throw ConfigError(fmt::format(
        "algorithm.overlap: {} does not overlap its exchange with the next step (those that do: "
        "{}){}", a.name, names_where([](const AlgorithmInfo& i) { return i.overlaps; }),
        a.name == "allreduce" ? "; allreduce overlaps backward with algorithm.average = gradients"
                              : ""));
  }
  if (a.sparsify.name != SparsifyConfig{}.name && (a.name != "allreduce" || !gradients)) {
    throw ConfigError(fmt::format("algorithm.sparsify.name: {} sparsifies averaged gradients: it "
                                  "needs algorithm.name: allreduce and algorithm.average: "
                                  "gradients, not {} averaging {}", a.sparsify.name, a.name,
                                  a.average));
  }
  check_wire(a);
  if (gradients && a.local_steps != 1) {
    throw ConfigError(fmt::format("algorithm.local_steps: {} with algorithm.average = gradients "
                                  "(the gradients are averaged every step)", a.local_steps));
  }
  if (gradients && a.hierarchical) {
    throw ConfigError("algorithm.hierarchical: not with algorithm.average = gradients");
  }
  // The keys this algorithm does not read, set away from their defaults: likely a mistake.
  std::vector<std::string> unread;
  ExperimentConfig given, defaults;
  given.algorithm = a;
  const nlohmann::json mine = to_json(given)["algorithm"], base = to_json(defaults)["algorithm"];
  for (const auto& [key, value] : mine.items()) {
    if (key == "name" || value == base[key]) continue;
    if (std::find(info.keys.begin(), info.keys.end(), key) == info.keys.end()) {
      unread.push_back(fmt::format("algorithm.{} is set, but {} does not read it (its keys: {})",
                                   key, a.name, fmt::join(info.keys, ", ")));
    }
  }
  if (a.hierarchical && a.name != "dpsgd" && a.name != "allreduce") {
    throw ConfigError(fmt::format(
        "algorithm.hierarchical: dpsgd and allreduce average hierarchically, not {}", a.name));
  }
  if (a.max_staleness > 0) {
    if (a.name != "dpsgd") {
      throw ConfigError(fmt::format(
          "algorithm.max_staleness: bounded staleness is dpsgd's, not {}'s (adpsgd's staleness is "
          "unbounded; sgp bounds its delay with algorithm.tau)", a.name));
    }
    if (a.overlap || a.hierarchical) {
      throw ConfigError(fmt::format("algorithm.max_staleness: not with algorithm.{} (a stale "
                                    "neighbor's model already stands in for the exchange in "
                                    "flight)", a.overlap ? "overlap" : "hierarchical"));
    }
    if (world_size > 1 && topology::is_time_varying(topology)) {
      throw ConfigError(fmt::format(
          "algorithm.max_staleness needs a static graph (the rounds a neighbor sent are kept "
          "per edge); topology.graph={} changes every round", topology.graph));
    }
  }
  if (a.hierarchical && a.overlap) {
    throw ConfigError("algorithm.hierarchical: not with algorithm.overlap (the three phases of a "
                      "round run one after the other)");
  }
  // Hierarchical: the graph is one of nodes, checked when their number is known (hierarchical.h).
  if (world_size <= 1 || info.needs == GraphNeeds::kNone || a.hierarchical) return unread;
  topology::validate_world(topology, world_size);
  if (info.static_graph_only && topology::is_time_varying(topology)) {
    throw ConfigError(fmt::format(
        "algorithm.name={} needs a static graph (its neighbor sums assume a fixed W); "
        "topology.graph={} changes every round", a.name, topology.graph));
  }
  if (info.needs == GraphNeeds::kDoublyStochastic) {
    check_schedule(a, topology, world_size, seed, topology::Stochastic::kDoubly,
                   "doubly stochastic weights (sgp takes column-stochastic ones: directed or "
                   "random_kout graphs)");
  } else if (info.needs == GraphNeeds::kColumnStochastic) {
    check_schedule(a, topology, world_size, seed, topology::Stochastic::kColumn,
                   "column-stochastic (push) weights");
  }
  return unread;
}

std::unique_ptr<Averaging> make_averaging(const AveragingContext& ctx) {
  if (ctx.algorithm.local_steps < 1) {
    throw ConfigError(
        fmt::format("algorithm.local_steps: {} (must be >= 1)", ctx.algorithm.local_steps));
  }
  if (ctx.params_region.bytes().data() != reinterpret_cast<std::byte*>(ctx.params.data()) ||
      ctx.params_region.bytes().size() != ctx.params.size_bytes()) {
    throw Error("make_averaging: params_region must register exactly the parameter arena");
  }
  const int n = ctx.hood.transport().world_size();
  const AlgorithmInfo& info = find_algorithm(ctx.algorithm.name);
  check_algorithm(ctx.algorithm, ctx.topology, n, ctx.seed);
  if (n == 1) return std::make_unique<NoAveraging>();
  AveragingContext mine = ctx;
  mine.purpose = purpose_of(info);
  if (ctx.algorithm.hierarchical) return make_hierarchical(mine);
  return info.make(mine);
}

}  // namespace murmur::optimizers
