// The registry of averaging algorithms. Each algorithm describes itself once, in its own file, by
// an AlgorithmInfo: its name, what it needs of the graph, the algorithm.* keys it reads (its
// config schema), whether it overlaps, compresses, rejoins a restarted peer and runs on a GPU,
// and its factory. Config validation, the runtime, murmur-topo --list and the sweep's plots ask
// the registry, never a list of names of their own. Adding an algorithm is one new file (the
// class and its entry) plus one line in algorithms.cc. Immutable after start-up; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "optimizers/averaging.h"
#include "optimizers/comm_plan.h"

namespace murmur::optimizers {

// What the mixing weights of the graph must sum to for the algorithm to be right.
enum class GraphNeeds {
  kNone,              // no graph: an exact average over every rank (the allreduce family)
  kAny,               // any graph whose edges can be taken both ways (AD-PSGD's matchings)
  kDoublyStochastic,  // rows and columns (D-PSGD and CHOCO converge to the exact mean)
  kColumnStochastic,  // columns (push-sum)
};

// How a restarted peer is taken back (membership/rejoin.h), or not at all.
enum class RejoinPolicy { kNone, kPerPair, kAgreed };

struct AlgorithmInfo {
  std::string_view name;
  std::string_view summary;  // one line, for --list and docs
  GraphNeeds needs = GraphNeeds::kNone;
  bool static_graph_only = false;  // the neighbor sums assume one fixed W (CHOCO)
  bool overlaps = false;           // overlaps its exchange with the next step (accepts overlap)
  // Serves its neighbors' requests on a thread of its own from the first step to finish(): the
  // Transport is the algorithm's until then (no program collectives in between, no rejoins).
  bool asynchronous = false;
  bool compresses = false;         // accepts algorithm.compressor
  RejoinPolicy rejoins = RejoinPolicy::kNone;
  bool device = true;              // runs on GPU memory through the op table
  // The algorithm.* keys it reads; any other key of algorithm: set away from its default is a
  // config error naming these.
  std::span<const std::string_view> keys;
  std::unique_ptr<Averaging> (*make)(const AveragingContext&) = nullptr;
  // What it sends per training step, for the cost model (comm_plan.h); null: no prediction.
  CommPlan (*plan)(const PlanContext&) = nullptr;
};

// Every registered algorithm, in registry order (which also numbers their tag purposes).
std::span<const AlgorithmInfo* const> algorithms();
// The entry named `name`. Throws ConfigError "algorithm.name: unknown algorithm 'x' (known: ...)".
const AlgorithmInfo& find_algorithm(std::string_view name);
// How a restarted peer is taken back under `algorithm`: its entry's policy, but none where
// algorithm.max_staleness is set (bounded_staleness.h).
RejoinPolicy rejoin_policy(const AlgorithmConfig& algorithm);
// The tag purpose of an algorithm's messages (transport/tag.h): one per registry entry.
unsigned purpose_of(const AlgorithmInfo& info);

// Every check of an algorithm's config that needs no transport: a known name, a compressor only
// where it compresses, overlap only where it overlaps, and (with a world of `world_size` > 1)
// a graph it can run on, with mixing weights of the sums it needs over the first rounds of the
// topology's schedule. Throws ConfigError naming the key. Returns one line per algorithm.* key
// set away from its default that the algorithm does not read (likely a mistake; the caller warns).
std::vector<std::string> check_algorithm(const AlgorithmConfig& algorithm,
                                         const TopologyConfig& topology, int world_size,
                                         std::uint64_t seed);

// Builds the algorithm named by ctx.algorithm.name after check_algorithm; a world of one gets
// one that does nothing. Throws ConfigError, and Error if ctx.params_region does not register
// exactly ctx.params.
std::unique_ptr<Averaging> make_averaging(const AveragingContext& ctx);

}  // namespace murmur::optimizers
