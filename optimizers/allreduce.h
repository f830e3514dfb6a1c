// The exact-average algorithms, built on the Neighborhood's exact average of the parameter arena
// (a ring allreduce; over the survivors in continue mode):
// - ExactAverage: the shared helper (one tag purpose, timing);
// - AllreduceAveraging (`allreduce`): every step (every H steps with local_steps = H), the
//   baseline that every decentralized paper compares with. With algorithm.average = gradients
//   it averages the gradients before the step instead, as PyTorch DDP does, in buckets of
//   bucket_mb from the arena's end; with overlap each bucket's allreduce starts on the
//   communication thread as soon as backward has finished its floats (Poseidon's wait-free
//   backprop, with tensor fusion), while the layers below still compute.
// With algorithm.sparsify dgc, each peer sends only the top of its momentum-corrected gradient
// (Deep Gradient Compression, dgc.h) through the sparse allreduce (SparCML,
// transport/sparse_allreduce.h), which writes the averaged, sparse gradient back.
// With algorithm.wire fp16 or bf16 the exact average runs the 16-bit ring with fp32 sums
// (wire.h). Local SGD and DiLoCo (local_sgd.h, diloco.h) use ExactAverage too. Not thread-safe.
#pragma once

#include <condition_variable>
#include <memory>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "optimizers/algorithm.h"
#include "optimizers/comm_thread.h"
#include "optimizers/dgc.h"
#include "optimizers/wire.h"
#include "transport/sparse_allreduce.h"
#include "transport/tag.h"

namespace murmur::optimizers {

extern const AlgorithmInfo kAllreduce;

class ExactAverage {
 public:
  // Over the parameters (ctx.params in ctx.params_region), or over `data`, registered as
  // `region` (allreduce's gradients), with the tags of `purpose`.
  explicit ExactAverage(const AveragingContext& ctx);
  ExactAverage(membership::Neighborhood& hood, unsigned purpose, transport::Region& region,
               std::span<float> data);
  // Replaces the parameters on every rank by their mean (bitwise the same on every rank). Every
  // rank calls it with the same round. Returns the seconds it took. A round whose average the
  // survivors skipped while agreeing on a new ring leaves the parameters as they were.
  double run(std::int64_t round) { return run(round, 0, params_.size()); }
  // The same for the `count` floats from `offset` on (a gradient bucket).
  double run(std::int64_t round, std::size_t offset, std::size_t count);
  // False iff the last run()'s round was skipped (the parameters are this rank's own).
  bool averaged() const { return averaged_; }
  // algorithm.wire fp16 or bf16: averages through this 16-bit ring instead of the
  // Neighborhood's fp32 one (null: back to that).
  void set_half_wire(std::unique_ptr<transport::HalfRingAllreduce> ring) { half_ = std::move(ring); }

 private:
  membership::Neighborhood& hood_;
  transport::Region& region_;
  std::span<float> params_;
  unsigned purpose_;
  transport::TagLayout layout_;
  bool averaged_ = true;
  std::unique_ptr<transport::HalfRingAllreduce> half_;
};

class AllreduceAveraging final : public Averaging {
 public:
  explicit AllreduceAveraging(const AveragingContext& ctx);
  ~AllreduceAveraging() override;
  // Averages the parameters after every local_steps-th step (average = params).
  void after_step(std::int64_t step) override;
  std::int64_t live_clock(std::int64_t step) const override { return step / local_steps_; }

  bool averages_gradients() const override { return gradients_; }
  void attach_gradients(std::span<float> grads, transport::Region& region) override;
  void grads_ready(std::int64_t step, std::size_t offset) override;
  void average_gradients(std::int64_t step) override;

  // Gradient buckets: [lo, hi) float ranges, the arena's end first (the order backward
  // finishes them). One bucket without overlap.
  struct Bucket {
    std::size_t lo = 0, hi = 0;
  };
  const std::vector<Bucket>& buckets() const { return buckets_; }
  // Of the gradient buckets averaged so far, how many started while backward still ran.
  std::int64_t buckets_started_in_backward() const;
  std::int64_t buckets_averaged() const;
  // DGC (algorithm.sparsify dgc): null without it.
  const DeepGradientCompression* dgc() const { return dgc_.get(); }
  // DGC's exchanges so far: pairs this peer sent, and how many went dense on the way.
  std::int64_t sparse_pairs_sent() const { return pairs_sent_; }
  std::int64_t sparse_went_dense() const { return went_dense_; }
  std::vector<std::pair<std::string, std::span<float>>> state() override;

 private:
  void average_buckets(std::int64_t step);  // the communication thread's job with overlap

  int local_steps_;
  ExactAverage average_;
  bool gradients_;
  bool overlap_;
  std::size_t bucket_floats_;  // with overlap; without, one bucket of the whole arena
  membership::Neighborhood& hood_;  // for the gradients' ExactAverage
  unsigned purpose_;
  std::optional<ExactAverage> grads_average_;  // attach_gradients()
  std::vector<Bucket> buckets_;
  // algorithm.sparsify dgc: the compression, its sparse allreduce and this step's pairs.
  std::span<const float> params_;
  std::span<float> grads_;  // attach_gradients()
  std::unique_ptr<DeepGradientCompression> dgc_;
  std::unique_ptr<transport::SparseAllreduce> sparse_;
  std::vector<std::uint32_t> sparse_index_;
  std::vector<float> sparse_value_;
  std::int64_t pairs_sent_ = 0, went_dense_ = 0;
  // algorithm.wire, for the gradients' average made in attach_gradients().
  WireConfig wire_;
  bool host_memory_;
  TransportConfig transport_config_;
  std::uint64_t seed_;
  // Between the training thread (grads_ready) and the communication thread (the job).
  mutable std::mutex mutex_;
  std::condition_variable ready_cv_;
  std::size_t ready_from_ = 0;   // the gradients from here on are final
  bool backward_done_ = true;    // grads_ready(.., 0) seen: backward has ended
  bool started_ = false;         // this step's job was started
  bool abandoned_ = false;       // the destructor runs: a waiting job returns
  std::int64_t in_backward_ = 0;
  std::int64_t averaged_ = 0;
  double job_s_ = 0;
  CommThread comm_;  // last: its thread stops first
};

}  // namespace murmur::optimizers
