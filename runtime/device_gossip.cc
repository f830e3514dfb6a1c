#include "runtime/device_gossip.h"

#include <algorithm>
#include <exception>

#include <fmt/format.h>

#include "core/error.h"

namespace murmur::runtime {
namespace {

// Waits for the stager's queued work when a round unwinds, so that no copy or kernel still
// reads or writes the slots and the arena while the exception travels. Declared before the
// CancelOnUnwind of the round, so that the network requests are cancelled first (no receive
// lands in a slot that an upload is reading).
class FinishOnUnwind {
 public:
  explicit FinishOnUnwind(ChunkStager& stager)
      : stager_(stager), uncaught_(std::uncaught_exceptions()) {}
  ~FinishOnUnwind() {
    if (std::uncaught_exceptions() <= uncaught_) return;
    try {
      stager_.finish();
    } catch (...) {  // the round's own error is the one to report
    }
  }
  FinishOnUnwind(const FinishOnUnwind&) = delete;
  FinishOnUnwind& operator=(const FinishOnUnwind&) = delete;

 private:
  ChunkStager& stager_;
  int uncaught_;
};

}  // namespace

bool uses_pipelined_gossip(const ExperimentConfig& config) {
  return config.run.device == "cuda" && config.algorithm.name == "dpsgd" &&
         !config.algorithm.overlap && config.run.on_peer_failure == "stop" &&
         config.world.size > 1;
}

PipelinedGossip::PipelinedGossip(const ExperimentConfig& config, transport::Transport& transport,
                                 ChunkStager& stager)
    : transport_(transport),
      stager_(stager),
      local_steps_(config.algorithm.local_steps),
      options_(optimizers::collective_options(config.transport)),
      schedule_(config.topology, transport.world_size(), transport.rank(), config.run.seed) {
  stager_.reserve(std::max<std::size_t>(1, schedule_.at(0).recv_from.size()));
}

void PipelinedGossip::after_step(std::int64_t step) {
  if (step % local_steps_ != 0) return;
  round(step / local_steps_ - 1);
}

void PipelinedGossip::round(std::int64_t r) {
  optimizers::Stopwatch watch;
  const topology::RankMixing& m = schedule_.at(r);
  const ChunkLayout& layout = stager_.layout();
  const std::size_t chunks = layout.count(), degree = m.recv_from.size();
  round_ = r;
  mixing_ = &m;
  stager_.reserve(std::max<std::size_t>(1, degree));
  neighbors_.resize(degree);
  weights_.resize(degree);
  for (std::size_t j = 0; j < degree; ++j) {
    neighbors_[j] = j;
    weights_[j] = static_cast<float>(m.recv_weights[j]);  // as Dpsgd converts them
  }
  recvs_.assign(chunks * degree, {});
  sends_.clear();
  sends_.reserve(chunks * m.send_to.size());

  FinishOnUnwind finish_on_unwind(stager_);
  transport::CancelOnUnwind cancel(transport_);
  cancel.watch(recvs_);
  cancel.watch(sends_);
  // Every receive is posted before anything is sent, so no chunk ever waits as unexpected.
  for (std::size_t k = 0; k < chunks; ++k) {
    const transport::Tag tag = optimizers::chunk_tag(optimizers::Purpose::kGossipChunk, r, k);
    for (std::size_t j = 0; j < degree; ++j) {
      recvs_[k * degree + j] =
          transport_.recv(m.recv_from[j], tag, stager_.in_region(), stager_.in_range(j, k));
    }
  }
  for (std::size_t k = 0; k < chunks; ++k) stager_.start_download(k);

  // Chunk k goes out as soon as its copy is done; meanwhile the chunks that have already come
  // in from every neighbor are mixed (only those already sent: a chunk's snapshot is taken
  // before its mix writes the arena).
  std::size_t mixed = 0;
  for (std::size_t k = 0; k < chunks; ++k) {
    stager_.wait_download(k);
    const transport::Tag tag = optimizers::chunk_tag(optimizers::Purpose::kGossipChunk, r, k);
    for (int to : m.send_to) {
      sends_.push_back(transport_.send(to, tag, stager_.out_region(), layout.bytes(k)));
    }
    while (mixed <= k && arrived(mixed, /*block=*/false)) mix_chunk(mixed++);
  }
  optimizers::Stopwatch blocked;
  while (mixed < chunks) {
    arrived(mixed, /*block=*/true);
    mix_chunk(mixed++);
  }
  for (transport::Request& s : sends_) {
    transport::wait_or_lost(transport_, s, options_.timeout, "pipelined gossip send");
  }
  stats_.wait_s += blocked.seconds();
  stager_.finish();
  stats_.comm_s += watch.seconds();
}

bool PipelinedGossip::arrived(std::size_t k, bool block) {
  const std::size_t degree = mixing_->recv_from.size();
  const std::size_t expected = stager_.layout().bytes(k).size;
  for (std::size_t j = 0; j < degree; ++j) {
    transport::Request& q = recvs_[k * degree + j];
    if (block) {
      transport::wait_or_lost(transport_, q, options_.timeout, "pipelined gossip chunk");
    } else if (!transport_.test(q)) {
      return false;
    }
    if (q.state()->bytes != expected) {
      throw ProtocolError(fmt::format(
          "{}: rank {}: rank {} sent {} bytes as chunk {} of {} in gossip round {} (tag {:#x}), "
          "expected {} (are the models the same size, and transport.chunk_bytes the same on "
          "every peer?)",
          transport_.name(), transport_.rank(), mixing_->recv_from[j], q.state()->bytes, k,
          stager_.layout().count(), round_,
          optimizers::chunk_tag(optimizers::Purpose::kGossipChunk, round_, k), expected));
    }
  }
  return true;
}

void PipelinedGossip::mix_chunk(std::size_t k) {
  // Lian et al. 2017, Algorithm 1, line 6, on chunk k: x_i <- W_ii x_i + sum_j W_ij x_j.
  stager_.upload_and_mix(k, neighbors_, static_cast<float>(mixing_->self_weight), weights_);
}

}  // namespace murmur::runtime
