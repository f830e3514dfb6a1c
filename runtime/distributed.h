// A peer's link to the others: its transport (rendezvous included), the parameter arena
// registered once, the averaging algorithm, and the exact average taken at the end of a run
// (the average model and the consensus distance). Absent for a lone peer. With
// run.on_peer_failure=continue it also keeps the LiveSet: lost peers are dropped from the
// averaging, and a restarted one is answered and taken back (optimizers/rejoin.h).
// Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/arena.h"
#include "core/config.h"
#include "optimizers/averaging.h"
#include "optimizers/live_set.h"
#include "optimizers/rejoin.h"
#include "transport/transport.h"

namespace murmur::runtime {

struct FinalAverage {
  double consensus_distance = 0;  // mean over peers of ||x_i - mean||_2
  std::vector<int> ranks;         // the peers averaged: all, or those alive at the end (continue)
};

class Distributed {
 public:
  // Meets the neighbors (blocks until they answer or the connect timeout passes) and builds the
  // algorithm over `params`, which must stay allocated and in place for this object's life.
  // `transport`, if given, is used instead of one made from config.transport (simulations).
  Distributed(const ExperimentConfig& config, int rank, Arena& params,
              std::shared_ptr<transport::Transport> transport = nullptr);
  ~Distributed();

  // The algorithm's step, then (continue mode) answers peers that asked to rejoin.
  void after_step(std::int64_t step);
  void flush() { averaging_->flush(); }
  optimizers::AveragingStats take_stats() { return averaging_->take_stats(); }
  optimizers::Averaging& averaging() { return *averaging_; }

  // Writes the model this peer should evaluate into `out` iff it differs from the raw parameters
  // (push-sum's x / w); returns whether it did. Call flush() first.
  bool debiased(std::span<float> out) const { return averaging_->debiased(out); }

  // Replaces `model` (this peer's final model) by the exact mean over all peers, with one ring
  // allreduce, and returns the consensus distance measured before. Every peer must call it.
  // With continue, the mean is over the ranks still alive (they agree on which).
  FinalAverage average(std::span<float> model);

  // Continue mode, a peer restarted after it died: asks its neighbors to take it back and puts
  // the mean of their parameters into the arena. Returns the step to go on from (`step` if
  // nobody answered, or without continue).
  std::int64_t rejoin(std::int64_t step);
  // The live set in continue mode, else nullptr.
  const optimizers::LiveSet* live() const { return live_.get(); }

  std::uint64_t bytes_sent() const { return transport_->bytes_sent(); }
  std::uint64_t bytes_received() const { return transport_->bytes_received(); }
  std::string backend() const { return transport_->name(); }
  // For the runtime's own device-side gossip (runtime/device_gossip.h), used instead of the
  // algorithm's rounds, never alongside them.
  transport::Transport& transport() { return *transport_; }

 private:
  // dpsgd, sgp, adpsgd: each pair agrees on when a rejoining peer is back (JoinStep::kPerPair).
  static bool is_gossip(const std::string& algorithm);
  // allreduce, local_sgd: every rank takes it back at one round (JoinStep::kAgreed).
  static bool is_allreduce_family(const std::string& algorithm);

  const ExperimentConfig& config_;
  std::shared_ptr<transport::Transport> transport_;
  std::unique_ptr<transport::Region> params_region_;
  Arena scratch_;  // the arena's layout again, for the final average
  std::unique_ptr<transport::Region> scratch_region_;
  std::span<float> params_;
  std::unique_ptr<optimizers::LiveSet> live_;               // continue mode only
  std::unique_ptr<optimizers::Averaging> averaging_;
  std::unique_ptr<optimizers::JoinResponder> responder_;    // continue mode, not choco
};

}  // namespace murmur::runtime
