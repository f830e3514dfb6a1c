// D-PSGD (`dpsgd`, Lian et al. 2017, "Can Decentralized Algorithms Outperform Centralized
// Algorithms?"): after every H-th local step each peer averages its model with this round's
// neighbors, x_i <- sum_j W_ij x_j, with W doubly stochastic (static or time-varying graphs).
// With algorithm.overlap the exchange runs on a communication thread during the next step and
// its result lands one step late, as a correction x_i += sum_j W_ij (x_j' - x_i') of the
// snapshots x' that were sent, which keeps the sum over peers exact. With a LiveSet
// (run.on_peer_failure=continue) a dead neighbor's weight goes back to the own weight, which keeps
// W symmetric and doubly stochastic over the live peers. Not thread-safe.
#pragma once

#include <memory>
#include <vector>

#include "optimizers/averaging.h"
#include "optimizers/comm_thread.h"

namespace murmur::optimizers {

class Dpsgd final : public Averaging {
 public:
  explicit Dpsgd(const AveragingContext& ctx);
  ~Dpsgd() override;
  void after_step(std::int64_t step) override;
  void flush() override;

 private:
  void apply_pending();  // overlap: waits for the exchange in flight and adds its correction
  // This round's mixing over the live neighbors (the schedule's as is without a LiveSet).
  topology::RankMixing mixing(std::int64_t round, std::int64_t step);
  // Sends and receives into slots_; returns which receives arrived (all, or throws, without
  // a LiveSet).
  std::vector<bool> exchange(transport::Tag tag, const transport::Region& from,
                             const topology::RankMixing& m);

  transport::Transport& transport_;
  transport::Region& params_region_;
  std::span<float> params_;
  int local_steps_;
  bool overlap_;
  LiveSet* live_;
  transport::CollectiveOptions options_;
  MixingSchedule schedule_;
  RecvSlots slots_;
  std::vector<const float*> inputs_;
  std::vector<float> weights_;
  // Overlap only: the snapshot that was sent, its registration, the mixing it was sent under.
  std::vector<float> snapshot_;
  std::unique_ptr<transport::Region> snapshot_region_;
  topology::RankMixing inflight_;
  std::vector<bool> inflight_got_;
  bool pending_ = false;
  std::unique_ptr<CommThread> comm_;  // last: its job uses the members above
};

}  // namespace murmur::optimizers
