// MixingSchedule: a rank's row and column of the mixing matrix round by round (topology/), cached
// for static graphs (computed once). And renormalize(): a round's mixing over the neighbors that
// take part, as the Neighborhood says (membership/neighborhood.h): the weight of a neighbor that
// does not is given back so that the sums an algorithm needs still hold. Not thread-safe.
#pragma once

#include <cstdint>

#include "core/config.h"
#include "membership/neighborhood.h"
#include "topology/mixing.h"

namespace murmur::optimizers {

class MixingSchedule {
 public:
  MixingSchedule(const TopologyConfig& config, int n, int rank, std::uint64_t seed);
  const topology::RankMixing& at(std::int64_t round);
  bool time_varying() const { return time_varying_; }

 private:
  const TopologyConfig& config_;
  int n_, rank_;
  std::uint64_t seed_;
  bool time_varying_;
  std::int64_t round_ = -1;
  topology::RankMixing current_;
};

// How a dropped neighbor's weight is given back: kRow (D-PSGD, symmetric doubly stochastic W:
// each side adds the weight of the edge it lost to its own, so W stays symmetric and doubly
// stochastic over the ranks that take part) or kColumn (push-sum: the mass meant for a dead
// out-neighbor stays with the sender). On a directed graph under D-PSGD (exponential) only the
// rows can be kept: the mean may drift while a rank is out.
enum class Renormalize { kRow, kColumn };

// `m` without the neighbors that do not take part at `step` (hood.alive), their weight returned
// to self_weight; `m` itself where everyone does (always, for a strict neighborhood).
topology::RankMixing renormalize(const topology::RankMixing& m, const membership::Neighborhood& hood,
                                 std::int64_t step, Renormalize how);

}  // namespace murmur::optimizers
