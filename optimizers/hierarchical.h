// Hierarchical averaging (`algorithm.hierarchical: true` with dpsgd or allreduce): the survey's
// lever for clusters whose links within a node are much faster than those between nodes, as
// Horovod's hierarchical allreduce and BlueFog's hierarchical neighbor allreduce do it. Every
// averaging round has three phases:
//   1. an exact average within each node (an allreduce over the node's ranks);
//   2. between nodes, one leader per node (its lowest rank): D-PSGD over the topology's graph
//      of nodes (node i mixes with its neighbors as rank i would in a world of `nodes`), or,
//      for allreduce, an exact average of the leaders;
//   3. the leader sends the result to the other ranks of its node.
// So only leaders cross nodes, with one model per graph edge instead of one per rank's edge. The
// ranks of a node are consecutive (r*k .. r*k+k-1 for k = ranks_per_node, as the launcher places
// them by slot and Slurm by block). Every rank of a node ends a round with the bitwise same model;
// with allreduce, every rank of the world does. Strict mode only (a lost leader would cut off its
// node). Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "optimizers/algorithm.h"
#include "optimizers/mixing_schedule.h"
#include "optimizers/recv_slots.h"
#include "transport/collectives.h"
#include "transport/tag.h"

namespace murmur::optimizers {

class DeviceFloatOps;

// The node of each rank and its leader, for a world of `world` ranks in nodes of `per_node`.
// Throws ConfigError naming world.ranks_per_node if `per_node` does not divide `world`.
struct NodeLayout {
  NodeLayout(int world, int per_node, int rank);
  int per_node, nodes, node, leader;  // leader: the lowest rank of this rank's node
  bool is_leader() const;
  int rank;
};

// Builds the hierarchical form of ctx.algorithm (dpsgd or allreduce; check_algorithm refuses the
// others, and overlap). Throws ConfigError for nodes of unequal size, and for a graph of nodes
// the algorithm cannot run on.
std::unique_ptr<Averaging> make_hierarchical(const AveragingContext& ctx);

class Hierarchical final : public Averaging {
 public:
  explicit Hierarchical(const AveragingContext& ctx);
  ~Hierarchical() override;
  void after_step(std::int64_t step) override;
  std::int64_t live_clock(std::int64_t step) const override { return step / local_steps_; }

 private:
  void between_nodes(std::int64_t round);

  membership::Neighborhood& hood_;
  device::Device& device_;
  transport::Region& params_region_;
  std::span<float> params_;
  int local_steps_;
  bool exact_;  // allreduce between the leaders; else D-PSGD over the graph of nodes
  unsigned purpose_;
  transport::TagLayout layout_;
  NodeLayout place_;
  std::vector<int> members_;  // this node's ranks but the leader
  std::unique_ptr<DeviceFloatOps> ops_;
  transport::Allreduce within_, between_;
  std::optional<MixingSchedule> nodes_schedule_;  // D-PSGD, leaders only
  RecvSlots slots_;
  std::vector<const float*> inputs_;
  std::vector<float> weights_;
};

}  // namespace murmur::optimizers
