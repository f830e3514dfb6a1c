// D-PSGD (`dpsgd`, Lian et al. 2017, "Can Decentralized Algorithms Outperform Centralized
// Algorithms?"): after every H-th local step each peer averages its model with this round's
// neighbors, x_i <- sum_j W_ij x_j, with W doubly stochastic (static or time-varying graphs).
// With algorithm.overlap the exchange runs on a communication thread during the next step and
// its result lands one step late, as a correction x_i += sum_j W_ij (x_j' - x_i') of the
// snapshots x' that were sent, which keeps the sum over peers exact. A neighbor that does not
// take part (the Neighborhood dropped it) gives its weight back to the own weight, which keeps
// W symmetric and doubly stochastic over the rest. The same code on host or GPU memory: on a GPU
// the transport stages the arena through pinned memory in chunks, or hands device memory to UCX.
// With algorithm.wire fp16 or bf16 (host memory, no overlap) each peer sends q(x_i), its
// parameters narrowed, and mixes in fp32 the differences x_i += sum_j W_ij (q(x_j) - q(x_i)):
// half the bytes, and for a symmetric W the mean over peers stays exact whatever the rounding.
// Not thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "core/half.h"
#include "core/rng.h"
#include "optimizers/algorithm.h"
#include "optimizers/comm_thread.h"
#include "optimizers/mixing_schedule.h"
#include "optimizers/recv_slots.h"
#include "transport/tag.h"

namespace murmur::optimizers {

extern const AlgorithmInfo kDpsgd;

class Dpsgd final : public Averaging {
 public:
  explicit Dpsgd(const AveragingContext& ctx);
  ~Dpsgd() override;
  void after_step(std::int64_t step) override;
  void flush() override;
  bool in_flight() const override { return pending_; }

 private:
  void apply_pending();  // overlap: waits for the exchange in flight and adds its correction
  // algorithm.wire: one round's exchange of 16-bit parameters, mixed as differences in fp32.
  void exchange_half(transport::Tag tag, const topology::RankMixing& m);

  membership::Neighborhood& hood_;
  device::Device& device_;
  transport::Region& params_region_;
  std::span<float> params_;
  int local_steps_;
  bool overlap_;
  unsigned purpose_;
  transport::TagLayout layout_;
  MixingSchedule schedule_;
  RecvSlots slots_;
  std::vector<const float*> inputs_;
  std::vector<float> weights_;
  // Overlap only: the snapshot that was sent, its registration, the mixing it was sent under.
  device::Array snapshot_;
  std::unique_ptr<transport::Region> snapshot_region_;
  topology::RankMixing inflight_;
  std::vector<std::size_t> inflight_got_;
  bool pending_ = false;
  // algorithm.wire fp16 or bf16: q(x_i) as sent (padded to whole floats) and widened, the
  // 16-bit receive slots, a widened neighbor, the stochastic rounding's stream.
  std::optional<HalfFormat> half_;
  std::vector<std::uint16_t> narrow_;
  std::unique_ptr<transport::Region> narrow_region_;  // after narrow_: unregistered first
  std::vector<float> own_, theirs_;
  std::optional<RecvSlots> half_slots_;
  bool stochastic_ = false;
  Rng rng_;
  std::unique_ptr<CommThread> comm_;  // last: its job uses the members above
};

}  // namespace murmur::optimizers
