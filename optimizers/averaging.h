// The averaging algorithm of a run: what a peer does with its neighbors after each local step.
// One small interface, one class per algorithm (allreduce, dpsgd, sgp, adpsgd, pairwise,
// local_sgd, diloco, choco, easgd), each described once by its registry entry (algorithm.h).
// Algorithms see the parameter arena as one flat float array on the peer's Device (host memory
// or a GPU, device/device.h), never layers, and compute only through the device's op table, so
// the same code runs on both.
// Who takes part and what a lost peer means is the Neighborhood's business
// (membership/neighborhood.h), never a branch here. Thread-compatible: the runtime calls these
// from one thread; an algorithm that overlaps communication with the next step runs its own
// communication thread and is the only user of the Transport while it is alive (until flush()).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "device/device.h"
#include "membership/neighborhood.h"
#include "transport/transport.h"

namespace murmur::optimizers {

// Wall time spent on averaging since the last take_stats(), split as the metrics report it:
// comm_s is time the training thread spent inside averaging calls (sending, receiving, mixing);
// wait_s is the part of it spent blocked on neighbors (or on the communication thread).
struct AveragingStats {
  double comm_s = 0;
  double wait_s = 0;
};

// What an asynchronous algorithm (adpsgd) saw of its exchanges since it started. staleness[a]
// counts the exchanges whose two peers were `a` local steps apart when they averaged (the last
// entry: that many or more); each exchange is counted by both its peers, `initiated` by one.
struct ExchangeReport {
  bool initiator = false;       // this peer starts exchanges (AD-PSGD's active side)
  std::uint64_t exchanges = 0;  // averaged, on this side
  std::uint64_t lost = 0;       // the partner was lost mid-exchange: this side left as it was
  std::uint64_t refused = 0;    // malformed or out-of-order requests refused (a partner's, or ours)
  std::vector<std::uint64_t> staleness;
  // The first kTracedExchanges exchanges of this side, in the order it made them (tests replay
  // them; the histogram above counts all).
  struct Traced {
    int partner = -1;
    std::uint64_t sequence = 0;  // the n-th exchange between the two
    std::int64_t step = 0, partner_step = 0;
  };
  std::vector<Traced> trace;
};
inline constexpr std::size_t kTracedExchanges = 1 << 16;
inline constexpr std::size_t kStalenessBuckets = 65;  // 0..63 steps apart, and 64 or more

// Everything an algorithm is built from. All references outlive the algorithm.
struct AveragingContext {
  const AlgorithmConfig& algorithm;
  const TopologyConfig& topology;
  const TransportConfig& transport_config;  // timeouts, chunk size
  membership::Neighborhood& hood;    // who takes part; hood.transport() moves the bytes
  device::Device& device;            // where params live, and the arithmetic on them
  std::span<float> params;           // the parameter arena, memory of `device`
  transport::Region& params_region;  // params registered with hood.transport()
  std::uint64_t seed;                // the run seed: every peer derives the same schedule
  unsigned purpose = 0;              // this algorithm's tag purpose (set by make_averaging)
  int ranks_per_node = 1;            // algorithm.hierarchical: consecutive ranks per node
  // The local optimizer's settings, whose momentum and decay algorithm.sparsify dgc takes over
  // (optimizers/dgc.h); null: the defaults.
  const OptimizerConfig* optimizer = nullptr;
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
  // The end of training, before the final average: ends the algorithm's exchanges for good (an
  // asynchronous one says so to its neighbors and serves them until they end too), so that
  // params hold the model and nothing but the caller uses the Transport from then on.
  virtual void finish() { flush(); }

  // The model to evaluate and checkpoint, written into `out` (device memory, params' size).
  // Push-sum keeps x/w; others return false: params already are the model. Called after flush().
  virtual bool debiased(std::span<float> out) { return false; }

  // A restarted peer's parameters were just replaced by its neighbors' (membership/rejoin.h):
  // state that follows the parameters is made to follow them again.
  virtual void rejoined() {}

  // Resume state: named flat arrays of the device (restored in place by the runtime) and scalars.
  virtual std::vector<std::pair<std::string, std::span<float>>> state() { return {}; }
  virtual std::map<std::string, std::string> scalars() const { return {}; }
  virtual void restore_scalars(const std::map<std::string, std::string>& scalars) {}

  // ---- gradient averaging (allreduce with algorithm.average = gradients, as DDP) ----
  // True iff the runtime must attach the gradients, report them ready during backward and call
  // average_gradients() before the optimizer step; the others average parameters in
  // after_step().
  virtual bool averages_gradients() const { return false; }
  // The gradient arena (memory of the device, params' size) and its registration.
  virtual void attach_gradients(std::span<float> grads, transport::Region& region) {}
  // During step `step`'s backward, on the training thread: the gradients from float `offset`
  // to the end are final (nn::StepContext::grads_ready), so their exchange may start.
  virtual void grads_ready(std::int64_t step, std::size_t offset) {}
  // After backward: returns with the gradients the mean of every peer's.
  virtual void average_gradients(std::int64_t step) {}

  virtual AveragingStats take_stats() { return std::exchange(stats_, {}); }
  // An asynchronous algorithm's count of its exchanges; nullopt for the others. Thread-safe.
  virtual std::optional<ExchangeReport> exchange_report() const { return std::nullopt; }

  // The number this algorithm asks the Neighborhood about after `step`: the step for the gossip
  // algorithms and local_sgd, the round (step / H) for allreduce and diloco. A rejoin's join
  // step is counted on this clock.
  virtual std::int64_t live_clock(std::int64_t step) const { return step; }

  // True while an exchange runs on the algorithm's communication thread (from after_step() until
  // the next after_step() or flush() completes it; an asynchronous algorithm's responder, from
  // the first after_step() until finish()): meanwhile that thread is the Transport's
  // only user, and the runtime must flush() before it touches the Transport itself.
  virtual bool in_flight() const { return false; }

 protected:
  AveragingStats stats_;
};

}  // namespace murmur::optimizers
