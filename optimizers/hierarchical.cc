#include "optimizers/hierarchical.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/stopwatch.h"
#include "optimizers/device_arrays.h"
#include "optimizers/exchange.h"
#include "transport/factory.h"

namespace murmur::optimizers {

namespace {
// The three phases of a round take three consecutive rounds of the tag: no two share a tag.
constexpr std::int64_t kPhases = 3;
enum Phase { kWithin = 0, kBetween = 1, kShare = 2 };
}  // namespace

NodeLayout::NodeLayout(int world, int per_node_, int rank_)
    : per_node(per_node_), nodes(0), node(0), leader(0), rank(rank_) {
  if (per_node < 1 || world % per_node != 0) {
    throw ConfigError(fmt::format(
        "algorithm.hierarchical: {} ranks do not make nodes of {} ranks each (world.ranks_per_node, "
        "else the launcher's local size: every node must hold as many ranks)", world, per_node));
  }
  nodes = world / per_node;
  node = rank / per_node;
  leader = node * per_node;
}

bool NodeLayout::is_leader() const { return rank == leader; }

std::unique_ptr<Averaging> make_hierarchical(const AveragingContext& ctx) {
  const AlgorithmConfig& a = ctx.algorithm;  // name and overlap: checked by check_algorithm
  const NodeLayout place(ctx.hood.transport().world_size(), ctx.ranks_per_node,
                         ctx.hood.transport().rank());
  if (a.name == "dpsgd" && place.nodes > 1) {
    // The graph is one of nodes: check it as a world of that many ranks.
    AlgorithmConfig flat = a;
    flat.hierarchical = false;
    check_algorithm(flat, ctx.topology, place.nodes, ctx.seed);
  }
  return std::make_unique<Hierarchical>(ctx);
}

Hierarchical::Hierarchical(const AveragingContext& ctx)
    : hood_(ctx.hood),
      device_(ctx.device),
      params_region_(ctx.params_region),
      params_(ctx.params),
      local_steps_(ctx.algorithm.local_steps),
      exact_(ctx.algorithm.name == "allreduce"),
      purpose_(ctx.purpose),
      layout_(ctx.hood.transport()),
      place_(ctx.hood.transport().world_size(), ctx.ranks_per_node, ctx.hood.transport().rank()),
      ops_(std::make_unique<DeviceFloatOps>(ctx.device)),
      within_(ctx.hood.transport(), transport::collective_options(ctx.transport_config), *ops_),
      between_(ctx.hood.transport(), transport::collective_options(ctx.transport_config), *ops_),
      slots_(ctx.hood.transport(), ctx.device, ctx.params.size()) {
  std::vector<int> node;
  for (int r = place_.leader; r < place_.leader + place_.per_node; ++r) {
    node.push_back(r);
    if (r != place_.leader) members_.push_back(r);
  }
  within_.set_ranks(node);
  std::vector<int> leaders;
  for (int i = 0; i < place_.nodes; ++i) leaders.push_back(i * place_.per_node);
  between_.set_ranks(leaders);
  if (!exact_ && place_.is_leader() && place_.nodes > 1) {
    nodes_schedule_.emplace(ctx.topology, place_.nodes, place_.node, ctx.seed);
  }
}

Hierarchical::~Hierarchical() = default;

void Hierarchical::after_step(std::int64_t step) {
  if (step % local_steps_ != 0) return;
  const std::int64_t round = step / local_steps_ - 1;
  const auto tag = [&](Phase p) { return layout_.make(purpose_, round * kPhases + p); };
  const transport::ByteRange all{0, params_.size_bytes()};
  Stopwatch watch;
  Stopwatch blocked;
  if (place_.per_node > 1) within_.run(params_region_, params_, transport::ReduceOp::kAverage, tag(kWithin));
  if (place_.is_leader() && place_.nodes > 1) {
    if (exact_) {
      between_.run(params_region_, params_, transport::ReduceOp::kAverage, tag(kBetween));
    } else {
      between_nodes(round);
    }
  }
  if (place_.per_node > 1) {
    // The leader's model, bitwise, on every rank of its node.
    if (place_.is_leader()) {
      exchange(hood_, tag(kShare), params_region_, all, members_, slots_, {});
    } else {
      const int leader[] = {place_.leader};
      exchange(hood_, tag(kShare), params_region_, all, {}, slots_, leader);
      device_.copy(params_, slots_.slot(0));
    }
  }
  // Every phase waits on the others; the arithmetic is small beside it, so all of it is waiting.
  stats_.wait_s += blocked.seconds();
  stats_.comm_s += watch.seconds();
}

void Hierarchical::between_nodes(std::int64_t round) {
  // D-PSGD (Lian et al. 2017) over the graph of nodes, node i as rank i of a world of `nodes`:
  // x_i <- sum_j W_ij x_j, each node's x its exact average of phase 1.
  const topology::RankMixing& m = nodes_schedule_->at(round);
  std::vector<int> send_to, recv_from;
  for (int node : m.send_to) send_to.push_back(node * place_.per_node);
  for (int node : m.recv_from) recv_from.push_back(node * place_.per_node);
  const transport::ByteRange all{0, params_.size_bytes()};
  exchange(hood_, layout_.make(purpose_, round * kPhases + kBetween), params_region_, all, send_to,
           slots_, recv_from);
  inputs_.clear();
  weights_.clear();
  for (std::size_t k = 0; k < recv_from.size(); ++k) {
    inputs_.push_back(slots_.slot(k).data());
    weights_.push_back(static_cast<float>(m.recv_weights[k]));
  }
  device_.mix(params_, static_cast<float>(m.self_weight), inputs_, weights_);
}

}  // namespace murmur::optimizers
