// A peer's link to the others: its transport (rendezvous included; through a StagingTransport
// when the parameters live off the host), the parameter arena registered once, who takes part
// (a strict or, with run.on_peer_failure=continue, a live Neighborhood, membership/), the
// averaging algorithm the registry builds, the answers to a restarted peer's rejoin, and the
// exact average taken at the end of a run (the average model and the consensus distance).
// Absent for a lone peer. Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "device/device.h"
#include "membership/live_set.h"
#include "membership/neighborhood.h"
#include "membership/rejoin.h"
#include "optimizers/averaging.h"
#include "optimizers/staging_transport.h"
#include "transport/float_ops.h"
#include "transport/transport.h"

namespace murmur::runtime {

struct FinalAverage {
  double consensus_distance = 0;  // mean over peers of ||x_i - mean||_2
  std::vector<int> ranks;         // the peers averaged: all, or those alive at the end (continue)
};

// The run's transport for `rank`, listening on the address that transport.host (by default
// "auto") comes to; meets the other peers through the configured rendezvous. Throws
// ConfigError (an address or rendezvous that cannot be), TransportError.
std::shared_ptr<transport::Transport> make_run_transport(const ExperimentConfig& config, int rank);

class Distributed {
 public:
  // Meets the neighbors (blocks until they answer or the connect timeout passes) and builds the
  // algorithm over `params` (memory of `device`), which must stay allocated and in place for
  // this object's life. `transport`, if given, is used instead of one made from
  // config.transport (simulations).
  Distributed(const ExperimentConfig& config, int rank, device::Device& device,
              std::span<float> params, std::shared_ptr<transport::Transport> transport = nullptr);
  ~Distributed();

  // The algorithm's step, then (continue mode) answers peers that asked to rejoin.
  void after_step(std::int64_t step);
  // algorithm.average = gradients (allreduce, as DDP): the model's gradient arena (device memory,
  // params' size), registered here once; then, each step, grads_ready() during backward and
  // average_gradients() before the optimizer step. No-ops for the other algorithms. Throws
  // ConfigError for gradient averaging with a live run.on_peer_failure (not supported yet).
  bool averages_gradients() const { return averaging_->averages_gradients(); }
  void attach_gradients(std::span<float> grads);
  void grads_ready(std::int64_t step, std::size_t offset) { averaging_->grads_ready(step, offset); }
  void average_gradients(std::int64_t step) { averaging_->average_gradients(step); }
  void flush() { averaging_->flush(); }
  // The end of training, before average(): the algorithm's exchanges end for good (averaging.h);
  // after an asynchronous one, the peers also wait for the slowest of them (end_barrier.h).
  void finish();
  optimizers::AveragingStats take_stats() { return averaging_->take_stats(); }
  optimizers::Averaging& averaging() { return *averaging_; }

  // Writes the model this peer should evaluate into `out` (device memory) iff it differs from
  // the raw parameters (push-sum's x / w); returns whether it did. Call flush() first.
  bool debiased(std::span<float> out) { return averaging_->debiased(out); }

  // Replaces `model` (this peer's final model, device memory) by the exact mean over all peers
  // and returns the consensus distance measured before. Every peer must call it. With continue,
  // the mean is over the ranks still alive (they agree on which).
  FinalAverage average(std::span<float> model);

  // The end of the run, after average(): every rank of `ranks` (average()'s) sends `mine`, its
  // result.json, to the lowest of them, which gets them all, by rank (result_gather.h).
  std::map<int, nlohmann::json> gather_results(const std::vector<int>& ranks, const nlohmann::json& mine);

  // The step the whole run goes on from: the lowest of every peer's `step` (its checkpoint's,
  // 0 for a fresh start). Peers stopped by one Ctrl-C checkpoint a step or two apart (one that
  // heard the signal late finished another step), and lockstep algorithms need them level again.
  // Every peer that starts with the run must call it; a peer rejoining a run calls rejoin().
  std::int64_t agree_start(std::int64_t step);

  // Continue mode, a peer restarted after it died: asks its neighbors to take it back and puts
  // the mean of their parameters into the arena. Returns the step to go on from (`step` if
  // nobody answered, or without continue).
  std::int64_t rejoin(std::int64_t step);
  // The live set in continue mode, else nullptr.
  const membership::LiveSet* live() const { return live_.get(); }

  // The backend itself, for host-memory messages beside the algorithm's (the sample shuffle's),
  // from the thread that drives the algorithm.
  transport::Transport& transport() { return *backend_; }
  std::uint64_t bytes_sent() const { return transport_->bytes_sent(); }
  std::uint64_t bytes_received() const { return transport_->bytes_received(); }
  std::string backend() const { return transport_->name(); }
  // How the parameters move, for the log: "host memory", "pinned staging in chunks of N bytes",
  // "device memory (ucx)".
  std::string describe_path() const;

 private:
  const ExperimentConfig& config_;
  device::Device& device_;
  std::span<float> params_;
  std::shared_ptr<transport::Transport> backend_;               // the real transport
  std::unique_ptr<optimizers::StagingTransport> staging_;       // off-host devices only
  transport::Transport* transport_;                             // staging_, else backend_
  std::unique_ptr<transport::FloatOps> ops_;                    // the device's arithmetic
  std::unique_ptr<transport::Region> params_region_;
  device::Array scratch_;  // the arena's size again, for the final average
  std::unique_ptr<transport::Region> scratch_region_;
  std::unique_ptr<transport::Region> grads_region_;  // attach_gradients()
  std::unique_ptr<membership::LiveSet> live_;                   // continue mode only
  std::unique_ptr<membership::Neighborhood> hood_;
  std::unique_ptr<optimizers::Averaging> averaging_;
  std::unique_ptr<membership::JoinResponder> responder_;        // where the algorithm rejoins
};

}  // namespace murmur::runtime
