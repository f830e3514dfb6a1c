// The averaging algorithm of a run: what a peer does with its neighbors after each local step.
// One small interface, one class per algorithm (allreduce, dpsgd, sgp, adpsgd, local_sgd, diloco,
// choco), chosen by `algorithm.name`. Algorithms see the parameter arena as one flat float array
// (registered once with the transport), never layers. Thread-compatible: the runtime calls these
// from one thread; an algorithm that overlaps communication with the next step runs its own
// communication thread and is the only user of the Transport while it is alive (until flush()).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "optimizers/live_set.h"
#include "transport/transport.h"

namespace murmur::optimizers {

// Wall time spent on averaging since the last take_stats(), split as the metrics report it:
// comm_s is time the training thread spent inside averaging calls (sending, receiving, mixing);
// wait_s is the part of it spent blocked on neighbors (or on the communication thread).
struct AveragingStats {
  double comm_s = 0;
  double wait_s = 0;
};

// Everything an algorithm is built from. The transport and region outlive the algorithm.
struct AveragingContext {
  const AlgorithmConfig& algorithm;
  const TopologyConfig& topology;
  const TransportConfig& transport_config;  // timeouts, chunk size
  transport::Transport& transport;
  transport::Region& params_region;  // the registered parameter arena
  std::span<float> params;           // the arena as floats (the same bytes as params_region)
  std::uint64_t seed;                // the run seed: every peer derives the same schedule
  // run.on_peer_failure=continue: the ranks believed alive, which the algorithm keeps up to date
  // and averages over. nullptr (stop): a lost neighbor is an error, as PeerLost.
  LiveSet* live = nullptr;
};

class Averaging {
 public:
  virtual ~Averaging() = default;

  // Called after the local optimizer's step; `step` counts completed local steps (1, 2, ...).
  // Mixes the parameters with this round's neighbors as the algorithm says; with overlap, may
  // return with the mixing still in flight (it lands in a later call or in flush()).
  virtual void after_step(std::int64_t step) = 0;
  // Completes everything in flight, so that params hold this peer's model (before evaluation,
  // a checkpoint, or the end of the run).
  virtual void flush() {}

  // The model to evaluate and checkpoint. Push-sum keeps x/w; others return params as is.
  // Called after flush(). Returns false if params already are the model.
  virtual bool debiased(std::span<float> out) const { return false; }

  // Resume state: named flat buffers (restored in place by the runtime) and scalars.
  virtual std::vector<std::pair<std::string, std::span<float>>> state() { return {}; }
  virtual std::map<std::string, std::string> scalars() const { return {}; }
  virtual void restore_scalars(const std::map<std::string, std::string>& scalars) {}

  virtual AveragingStats take_stats() { return std::exchange(stats_, {}); }

  // The number this algorithm asks a LiveSet about after `step`: the step for the gossip
  // algorithms and local_sgd, the round (step / H) for allreduce and diloco. A rejoin's join
  // step is counted on this clock.
  virtual std::int64_t live_clock(std::int64_t step) const { return step; }

 protected:
  AveragingStats stats_;
};

// Builds the algorithm named by ctx.algorithm.name ("none" gives one that does nothing).
// Throws ConfigError for a name, topology or world size the algorithm cannot take.
std::unique_ptr<Averaging> make_averaging(const AveragingContext& ctx);

}  // namespace murmur::optimizers
