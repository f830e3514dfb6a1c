// Pairwise gossip in rounds (`pairwise`): AD-PSGD's averaging x_i, x_j <- (x_i + x_j) / 2 with
// one neighbor at a time, but in lockstep: round t's pairs are fixed, so a slow peer holds back
// its partner of each round, and through them everyone (`adpsgd`, adpsgd.h, is the asynchronous
// algorithm of the paper). The exchange runs on a communication thread, one step behind. The
// pairs of round t are a matching of the topology's graph (edges taken both ways)
// drawn from (seed, t), so every peer derives the same pairs without a coordinator. The
// average of a round is computed on the snapshots sent and added one step later as a
// difference, which keeps the sum over peers exact. A partner that does not take part (the
// Neighborhood dropped it) is skipped: this peer sits the round out. One-sided
// (algorithm.one_sided): each snapshot is written into the partner's window (put_windows.h), the
// same floats; a restarted peer is not taken back there. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "optimizers/algorithm.h"
#include "optimizers/comm_thread.h"
#include "optimizers/put_windows.h"
#include "optimizers/recv_slots.h"
#include "topology/graph.h"
#include "transport/tag.h"

namespace murmur::optimizers {

// The partner of `rank` in round `round` (-1 if it sits out): a maximal matching of g's edges
// (both directions), greedy over ranks in an order drawn from (seed, round), each unmatched rank
// taking a uniformly drawn unmatched neighbor. Pure: every rank computes the same matching.
int pairwise_partner(const topology::Graph& g, std::uint64_t seed, std::int64_t round, int rank);

extern const AlgorithmInfo kPairwise;

class Pairwise final : public Averaging {
 public:
  explicit Pairwise(const AveragingContext& ctx);
  ~Pairwise() override;
  void after_step(std::int64_t step) override;
  void flush() override;
  bool in_flight() const override { return pending_; }

 private:
  void apply_pending();

  membership::Neighborhood& hood_;
  device::Device& device_;
  std::span<float> params_;
  const TopologyConfig& topology_;
  std::uint64_t seed_;
  int local_steps_;
  unsigned purpose_;
  transport::TagLayout layout_;
  device::Array snapshot_;
  std::unique_ptr<transport::Region> snapshot_region_;
  RecvSlots slots_;
  std::unique_ptr<PutWindows> windows_;  // the one-sided path, else null
  std::span<const float> landed_;        // one-sided: the partner's snapshot, in our window
  std::int64_t round_ = -1;              // of the exchange in flight
  int partner_ = -1;  // of the exchange in flight
  bool got_ = false;  // whether the partner's snapshot arrived
  bool pending_ = false;
  std::unique_ptr<CommThread> comm_;  // last: its job uses the members above
};

}  // namespace murmur::optimizers
