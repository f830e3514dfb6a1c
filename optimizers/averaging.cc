// make_averaging: checks that the algorithm can run on the configured topology and world, then
// builds it. The checks look at the mixing matrices themselves (rows, columns), so a custom
// matrix is held to the same rule as a built-in graph.
#include "optimizers/averaging.h"

#include <fmt/format.h>

#include "core/error.h"
#include "optimizers/adpsgd.h"
#include "optimizers/allreduce.h"
#include "optimizers/choco.h"
#include "optimizers/diloco.h"
#include "optimizers/dpsgd.h"
#include "optimizers/local_sgd.h"
#include "optimizers/sgp.h"
#include "topology/mixing.h"
#include "topology/schedule.h"

namespace murmur::optimizers {

namespace {

class NoAveraging final : public Averaging {
 public:
  void after_step(std::int64_t) override {}
};

// Checks the first rounds of the schedule (a whole period of one_peer_exponential, a sample of
// random gossip): enough to catch a graph whose weights can never have the needed sums.
void check_schedule(const AveragingContext& ctx, topology::Stochastic need, const char* why) {
  const int n = ctx.transport.world_size();
  const int rounds = topology::is_time_varying(ctx.topology) ? 4 : 1;
  for (int t = 0; t < rounds; ++t) {
    const auto w = topology::mixing_at(ctx.topology, n, ctx.seed, t);
    topology::check_stochastic(
        w, need,
        fmt::format("algorithm.name={} needs {}: topology.graph={} weights={} round {}",
                    ctx.algorithm.name, why, ctx.topology.graph, ctx.topology.weights, t));
  }
}

}  // namespace

std::unique_ptr<Averaging> make_averaging(const AveragingContext& ctx) {
  const std::string& name = ctx.algorithm.name;
  if (ctx.algorithm.local_steps < 1) {
    throw ConfigError(
        fmt::format("algorithm.local_steps: {} (must be >= 1)", ctx.algorithm.local_steps));
  }
  if (ctx.params_region.bytes().data() != reinterpret_cast<std::byte*>(ctx.params.data()) ||
      ctx.params_region.bytes().size() != ctx.params.size_bytes()) {
    throw Error("make_averaging: params_region must register exactly the parameter arena");
  }
  if (name == "none") return std::make_unique<NoAveraging>();
  if (ctx.transport.world_size() == 1) return std::make_unique<NoAveraging>();
  if (name == "allreduce") return std::make_unique<AllreduceAveraging>(ctx);
  if (name == "local_sgd") return std::make_unique<LocalSgd>(ctx);
  if (name == "diloco") return std::make_unique<Diloco>(ctx);
  if (name == "dpsgd") {
    check_schedule(ctx, topology::Stochastic::kDoubly,
                   "doubly stochastic weights (use sgp for directed or random_kout graphs)");
    return std::make_unique<Dpsgd>(ctx);
  }
  if (name == "sgp") {
    check_schedule(ctx, topology::Stochastic::kColumn, "column-stochastic (push) weights");
    return std::make_unique<Sgp>(ctx);
  }
  if (name == "adpsgd") return std::make_unique<Adpsgd>(ctx);
  if (name == "choco") {
    if (topology::is_time_varying(ctx.topology)) {
      throw ConfigError(fmt::format(
          "algorithm.name=choco needs a static graph (its neighbor sums assume a fixed W); "
          "topology.graph={} changes every round",
          ctx.topology.graph));
    }
    check_schedule(ctx, topology::Stochastic::kDoubly, "doubly stochastic weights");
    return std::make_unique<Choco>(ctx);
  }
  throw ConfigError(fmt::format(
      "algorithm.name: unknown algorithm '{}' (none, allreduce, dpsgd, sgp, adpsgd, local_sgd, "
      "diloco, choco)",
      name));
}

}  // namespace murmur::optimizers
