#include "runtime/distributed.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "optimizers/algorithm.h"
#include "optimizers/device_arrays.h"
#include "runtime/end_barrier.h"
#include "runtime/result_gather.h"
#include "topology/mixing.h"
#include "topology/schedule.h"
#include "core/error.h"
#include "core/logging.h"
#include "transport/address.h"
#include "transport/factory.h"
#include "transport/tag.h"
#include "transport/world.h"

namespace murmur::runtime {
namespace {

// How often an overlapped algorithm's exchange is completed early so that the rejoin responder
// can use the Transport, while some rank is dead.
constexpr std::int64_t kJoinPollSteps = 8;

// algorithm.hierarchical: the ranks of one node, world.ranks_per_node or else the launcher's
// local size. Nodes are blocks of consecutive ranks; where the launcher says which node this
// rank is on (MURMUR_NODE_RANK over ssh, SLURM_NODEID under srun), it must be that block's.
int ranks_per_node(const ExperimentConfig& config, int rank, bool live) {
  if (live) {
    throw ConfigError("algorithm.hierarchical: not with run.on_peer_failure: continue (a node "
                      "whose leader is lost would be cut off from the others)");
  }
  const int k = config.world.ranks_per_node > 0 ? config.world.ranks_per_node : transport::local_size();
  for (const char* name : {"MURMUR_NODE_RANK", "SLURM_NODEID"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    const int said = std::atoi(value);
    if (said != rank / k) {
      throw ConfigError(fmt::format(
          "algorithm.hierarchical: rank {} runs on node {} (${}), but nodes of {} consecutive ranks "
          "put it on node {}: place ranks in blocks (murmur-launch --map-by slot, Slurm's block "
          "distribution), as many on every node, or set world.ranks_per_node",
          rank, said, name, k, rank / k));
    }
    break;
  }
  return k;
}

}  // namespace

std::shared_ptr<transport::Transport> make_run_transport(const ExperimentConfig& config, int rank) {
  TransportConfig tc = config.transport;
  const transport::ChosenAddress chosen = transport::choose_listen_address(tc, config.world.size);
  tc.host = chosen.address;
  // Said once in the log: on a cluster, the first thing to know when peers cannot reach each other.
  log().info("rank {}: {} transport on {} ({})", rank, tc.backend, chosen.address, chosen.why);
  return transport::make_transport(tc, rank, config.world.size);
}

Distributed::Distributed(const ExperimentConfig& config, int rank, device::Device& device,
                         std::span<float> params, std::shared_ptr<transport::Transport> transport)
    : config_(config),
      device_(device),
      params_(params),
      backend_(transport ? std::move(transport) : make_run_transport(config, rank)),
      transport_(backend_.get()) {
  // Every tag of the run fits the backend's width: checked here, once, before anything is sent.
  [[maybe_unused]] const transport::TagLayout layout(*backend_);
  if (!device_.host_memory()) {
    staging_ = std::make_unique<optimizers::StagingTransport>(
        *backend_, device_, static_cast<std::size_t>(config.transport.chunk_bytes));
    transport_ = staging_.get();
  }
  ops_ = std::make_unique<optimizers::DeviceFloatOps>(device_);
  params_region_ = optimizers::register_array(*transport_, device_, params_);
  scratch_ = device_.zeros(params_.size());
  scratch_region_ = optimizers::register_array(*transport_, device_, scratch_.span());
  const auto options = transport::collective_options(config.transport);
  if (membership::is_live(config.run.on_peer_failure)) {
    live_ = std::make_unique<membership::LiveSet>(
        config.world.size, transport_->rank(),
        std::chrono::milliseconds(config.transport.peer_timeout_ms),
        std::chrono::milliseconds(config.transport.recv_timeout_ms));
    // A rank given up for dead is told so, by the connection closing (tcp): a false death (a
    // partition that heals) ends with both sides apart, not with one waiting on the other. Not
    // a rank whose join request has landed: its old process is the dead one, and the connection
    // is the new process's (which would take the close for a refusal to take it back).
    live_->restart_probe([this](int r) { return responder_ && responder_->restarted(r); });
    live_->on_dead([this](int r) {
      if (!live_->restarted(r)) transport_->drop(r);
    });
    hood_ = membership::live_neighborhood(*transport_, *live_, options, *ops_);
  } else {
    hood_ = membership::strict_neighborhood(*transport_, options, *ops_);
  }
  optimizers::AveragingContext ctx{config.algorithm, config.topology, config.transport,
                                   *hood_,           device_,         params_,
                                   *params_region_,  config.run.seed};
  ctx.optimizer = &config.train.optimizer;
  if (config.algorithm.hierarchical) ctx.ranks_per_node = ranks_per_node(config, transport_->rank(), live_ != nullptr);
  averaging_ = optimizers::make_averaging(ctx);
  const optimizers::RejoinPolicy rejoins = optimizers::rejoin_policy(config.algorithm);
  if (!live_ || rejoins == optimizers::RejoinPolicy::kNone) return;
  // How far apart neighbors' clocks can drift (the rest of the margin is the answerer's pace
  // over one peer timeout, rejoin.h): gossip steps drift by about one round per hop; a ring
  // moves in lockstep, a round or two apart while it agrees.
  const bool per_pair = rejoins == optimizers::RejoinPolicy::kPerPair;
  const std::int64_t hops = config.world.size + 2;
  const std::int64_t drift = per_pair ? hops * config.algorithm.local_steps : hops;
  responder_ = std::make_unique<membership::JoinResponder>(
      *transport_, *live_, params_.size(),
      [this](std::span<float> host) { device_.download(host, params_); }, drift,
      per_pair ? membership::JoinStep::kPerPair : membership::JoinStep::kAgreed);
}

Distributed::~Distributed() = default;

std::string Distributed::describe_path() const {
  if (device_.host_memory()) return "host memory";
  if (staging_ && !staging_->staged()) return fmt::format("device memory ({})", backend_->name());
  return fmt::format("pinned staging in chunks of {} bytes", config_.transport.chunk_bytes);
}

void Distributed::attach_gradients(std::span<float> grads) {
  if (!averaging_->averages_gradients()) return;
  if (live_) {
    throw ConfigError(fmt::format(
        "algorithm.average = gradients: runs with run.on_peer_failure = stop only, not {} (the "
        "survivors' ring is agreed per parameter round)", config_.run.on_peer_failure));
  }
  grads_region_ = optimizers::register_array(*transport_, device_, grads);
  averaging_->attach_gradients(grads, *grads_region_);
}

void Distributed::after_step(std::int64_t step) {
  averaging_->after_step(step);
  if (!responder_) return;
  if (averaging_->in_flight()) {
    // The exchange's thread is the Transport's only user (averaging.h); the responder needs the
    // Transport only while some rank is dead, and then completes the exchange first, every
    // kJoinPollSteps steps (so an overlapped run loses the overlap of one step in that many).
    // Polling beside the exchange would race on the ucx worker or ofi endpoint.
    if (step % kJoinPollSteps != 0 || !responder_->has_work()) return;
    averaging_->flush();
  }
  responder_->poll(step, averaging_->live_clock(step));
}

std::int64_t Distributed::rejoin(std::int64_t step) {
  if (!live_ || !responder_) return step;
  const bool per_pair =
      optimizers::rejoin_policy(config_.algorithm) == optimizers::RejoinPolicy::kPerPair;
  // Ask the ranks this one averages with: its graph neighbors (a static graph), or everyone
  // (a graph that changes every round, and the allreduce family, which averages with all).
  const int n = config_.world.size, self = transport_->rank();
  // The rest are told only, so that they count this rank in again too.
  std::vector<int> ask, tell;
  if (per_pair && !topology::is_time_varying(config_.topology)) {
    const auto m = topology::rank_mixing(config_.topology, n, self, config_.run.seed, 0);
    ask = m.recv_from;
    ask.insert(ask.end(), m.send_to.begin(), m.send_to.end());
    std::sort(ask.begin(), ask.end());
    ask.erase(std::unique(ask.begin(), ask.end()), ask.end());
    for (int r = 0; r < n; ++r) {
      if (r != self && !std::binary_search(ask.begin(), ask.end(), r)) tell.push_back(r);
    }
  } else {
    for (int r = 0; r < n; ++r) {
      if (r != self) ask.push_back(r);
    }
  }
  std::vector<float> host(params_.size());
  device_.download(host, params_);
  const auto result = membership::rejoin(
      *transport_, *live_, ask, host, step,
      per_pair ? membership::JoinStep::kPerPair : membership::JoinStep::kAgreed, tell);
  if (result.models > 0) {
    device_.upload(params_, host);
    averaging_->rejoined();
  }
  return result.step;
}

std::int64_t Distributed::agree_start(std::int64_t step) {
  // One average, of a vector with a slot per rank where only this rank's is non-zero: the mean
  // times the number of ranks that took part is every rank's step. A step goes as three base-4096
  // digits, small integers that survive the float sum and the division exactly (steps < 2^36).
  constexpr int kDigits = 3;
  constexpr std::int64_t kBase = 4096;
  const int n = config_.world.size;
  std::vector<float> slots(static_cast<std::size_t>(kDigits * n), 0.0f);
  for (int d = 0; d < kDigits; ++d) {
    slots[static_cast<std::size_t>(kDigits * transport_->rank() + d)] =
        static_cast<float>((step >> (12 * (kDigits - 1 - d))) % kBase);
  }
  device::Array buffer = device_.zeros(slots.size());
  const auto region = optimizers::register_array(*transport_, device_, buffer.span());
  device_.upload(buffer.span(), std::span<const float>(slots));
  const transport::TagLayout layout(*transport_);
  if (!hood_->average(*region, buffer.span(), layout.make(transport::purpose::kStartStep, 0), 0)) {
    return step;  // live: the others met at a later round, so they are under way already
  }
  device_.download(std::span<float>(slots), buffer.span());
  const std::vector<int> ranks = hood_->ranks(0);
  std::int64_t lowest = step;
  for (const int r : ranks) {
    std::int64_t theirs = 0;
    for (int d = 0; d < kDigits; ++d) {
      const float mean = slots[static_cast<std::size_t>(kDigits * r + d)];
      theirs = theirs * kBase + std::lround(mean * static_cast<float>(ranks.size()));
    }
    lowest = std::min(lowest, theirs);
  }
  return lowest;
}

void Distributed::finish() {
  averaging_->finish();
  // Stop mode only (end_barrier.h): continue mode's live average waits while a peer is heard.
  if (live_ || !optimizers::find_algorithm(config_.algorithm.name).asynchronous) return;
  std::vector<int> everyone(static_cast<std::size_t>(config_.world.size));
  std::iota(everyone.begin(), everyone.end(), 0);
  // Host bytes: the real transport, not the staging one.
  await_everyone(*backend_, config_.transport, everyone);
}

FinalAverage Distributed::average(std::span<float> model) {
  const std::span<float> mean = scratch_.span().first(model.size());
  device_.copy(mean, model);
  // Continue mode: over the ranks alive at the end, which the survivors agree on.
  constexpr std::int64_t kEnd = std::numeric_limits<std::int64_t>::max() / 2;
  const transport::TagLayout layout(*transport_);
  hood_->average(*scratch_region_, mean, layout.make(transport::purpose::kFinalAverage, 0), kEnd);
  const double sq = device_.squared_distance(model, mean);
  device_.copy(model, mean);
  // The mean of the distances over peers: one more (tiny) average, in the scratch's first
  // float now that the model has been copied out.
  const float distance = static_cast<float>(std::sqrt(sq));
  device_.upload(mean.first(1), std::span<const float>(&distance, 1));
  hood_->average(*scratch_region_, mean.first(1),
                 layout.make(transport::purpose::kConsensusDistance, 0), kEnd);
  float mean_distance = 0;
  device_.download(std::span<float>(&mean_distance, 1), mean.first(1));
  return {static_cast<double>(mean_distance), hood_->ranks(kEnd)};
}

std::map<int, nlohmann::json> Distributed::gather_results(const std::vector<int>& ranks,
                                                         const nlohmann::json& mine) {
  // Host bytes: the real transport, not the staging one.
  return runtime::gather_results(*backend_, config_.transport, ranks, mine);
}

}  // namespace murmur::runtime
