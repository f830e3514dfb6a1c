// PipelinedGossip: a D-PSGD round (optimizers/dpsgd.h, without overlap) for parameters that
// live on a device, cut into chunks of transport.chunk_bytes so that device-host copies overlap
// the transfer. One round posts every receive first (each in-neighbor, each chunk, tag =
// chunk_tag(kGossipChunk, round, chunk)), queues every chunk's download, then sends chunk k
// to every out-neighbor as soon as its download is done, and mixes chunk k (upload and `mix`,
// queued, no host wait) as soon as it arrived from every in-neighbor; it ends by waiting for the
// sends and the device. The arithmetic is Dpsgd's: x <- self * x + sum_j w_j x_j over the
// round's mixing, so the device stays the authority and the host arena is refreshed only for
// evaluation and checkpoints. The copying and mixing is the ChunkStager's (runtime/chunk_stager.h).
// Not thread-safe; the training thread drives it and the Transport.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/config.h"
#include "optimizers/averaging.h"
#include "optimizers/comm_thread.h"
#include "runtime/chunk_stager.h"
#include "transport/collectives.h"
#include "transport/transport.h"

namespace murmur::runtime {

// True iff a peer of `config` averages through PipelinedGossip: run.device cuda, algorithm
// dpsgd without overlap, run.on_peer_failure stop (a lost neighbor ends the run; no LiveSet),
// and more than one peer. Every other run copies the whole arena around the host algorithm.
bool uses_pipelined_gossip(const ExperimentConfig& config);

class PipelinedGossip {
 public:
  // `config`, `transport` and `stager` must outlive this object. Every peer must use the same
  // transport.chunk_bytes (the stager's layout), or a chunk arrives with the wrong size.
  PipelinedGossip(const ExperimentConfig& config, transport::Transport& transport,
                  ChunkStager& stager);

  // After local step `step` (1, 2, ...): every algorithm.local_steps-th step runs round
  // step / local_steps - 1, as Dpsgd::after_step does.
  void after_step(std::int64_t step);
  // One round. Throws PeerLost naming a neighbor that did not answer within
  // transport.recv_timeout_ms, ProtocolError naming a neighbor whose chunk has the wrong size,
  // CudaError from the device. After a throw nothing is left in flight.
  void round(std::int64_t round);

  optimizers::AveragingStats take_stats() { return std::exchange(stats_, {}); }

 private:
  // True iff chunk k has arrived from every in-neighbor; with `block`, waits for it (and is
  // then always true). Checks each chunk's size.
  bool arrived(std::size_t k, bool block);
  void mix_chunk(std::size_t k);

  transport::Transport& transport_;
  ChunkStager& stager_;
  int local_steps_;
  transport::CollectiveOptions options_;
  optimizers::MixingSchedule schedule_;
  optimizers::AveragingStats stats_;
  // This round's state (kept to allocate nothing in steady state).
  std::int64_t round_ = 0;
  const topology::RankMixing* mixing_ = nullptr;
  std::vector<transport::Request> recvs_;  // chunk-major: recvs_[k * degree + j]
  std::vector<transport::Request> sends_;
  std::vector<std::size_t> neighbors_;     // 0 .. degree-1
  std::vector<float> weights_;
};

}  // namespace murmur::runtime
