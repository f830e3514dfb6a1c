#include "optimizers/allreduce.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "core/names.h"
#include "core/stopwatch.h"
#include "transport/factory.h"
#include "transport/tag.h"
#include "optimizers/dgc.h"
#include "optimizers/wire.h"

namespace murmur::optimizers {

namespace {
constexpr std::string_view kKeys[] = {"local_steps", "hierarchical", "overlap", "average",
                                      "bucket_mb", "sparsify", "wire"};
constexpr std::string_view kAverages[] = {"params", "gradients"};
[[maybe_unused]] const bool kRegistered =
    register_names("algorithm.average", {std::begin(kAverages), std::end(kAverages)});
constexpr std::size_t kNotReady = std::numeric_limits<std::size_t>::max();
}  // namespace

namespace {
// The exact average of the parameters every H steps, or of the gradients every step (in
// buckets of bucket_mb with overlap); a 16-bit wire halves the bytes; DGC's sparse allreduce
// sends (index, value) pairs at its mean density over the run (its warm-up included).
CommPlan plan_allreduce(const PlanContext& c) {
  const AlgorithmConfig& a = c.config.algorithm;
  const int n = c.config.world.size;
  const double chunk = static_cast<double>(c.config.transport.chunk_bytes);
  const double floats = static_cast<double>(c.parameters);
  const double value_bytes = half_wire(a.wire) ? 2 : 4;
  CommPlan plan;
  if (a.hierarchical) {
    plan.note = "hierarchical allreduce: not modeled (its two levels depend on the hosts)";
    return plan;
  }
  if (a.sparsify.name == "dgc") {
    // Recursive doubling of the merged pairs (transport/sparse_allreduce.h): level l sends the
    // merge of 2^l ranks' pairs, 8 bytes each and a 16-byte header, or the dense vector once
    // that is smaller; ranks beyond the largest power of two fold in and out as dense ones do.
    const OptimizerConfig optimizer = c.config.train.optimizer;
    const DeepGradientCompression dgc(a.sparsify, optimizer, n, c.parameters);
    const std::int64_t steps = std::max<std::int64_t>(1, c.steps);
    double pairs = 0;
    for (std::int64_t s = 1; s <= steps; ++s) pairs += static_cast<double>(dgc.count(s));
    pairs /= static_cast<double>(steps);
    int p = 1;
    while (2 * p <= n) p *= 2;
    double merged = pairs;
    for (int k = 1; k < p; k *= 2) {
      const double bytes = std::min(16 + 8 * merged, 4 * floats);
      plan.parts.push_back({"sparse allreduce of the gradients (a level)", 1, 1, bytes, bytes});
      merged = std::min(2 * merged, floats);
    }
    if (p < n) plan.parts.push_back({"sparse allreduce (fold in and out)", 1, 2, 4 * floats, 4 * floats});
    plan.note = "DGC: pairs at the mean density over the run, indices taken as disjoint";
    return plan;
  }
  if (a.average == "gradients") {
    const double bucket = a.overlap ? a.bucket_mb * (1 << 20) / 4 : floats;
    for (double left = floats; left > 0; left -= bucket) {
      for (CommPart& part : allreduce_parts("allreduce of a gradient bucket",
                                            std::min(left, bucket) * value_bytes, n, chunk, 1,
                                            half_wire(a.wire).has_value())) {
        plan.parts.push_back(part);
      }
    }
    return plan;
  }
  plan.parts = allreduce_parts("allreduce of the parameters", floats * value_bytes, n, chunk,
                               every_steps(a.local_steps, c.steps), half_wire(a.wire).has_value());
  return plan;
}
}  // namespace

const AlgorithmInfo kAllreduce{
    .name = "allreduce",
    .summary = "exact average every H steps (ring allreduce): the synchronous baseline",
    .needs = GraphNeeds::kNone,
    .rejoins = RejoinPolicy::kAgreed,
    .keys = kKeys,
    .make = [](const AveragingContext& c) -> std::unique_ptr<Averaging> {
      return std::make_unique<AllreduceAveraging>(c);
    },
    .plan = plan_allreduce};

ExactAverage::ExactAverage(const AveragingContext& ctx)
    : ExactAverage(ctx.hood, ctx.purpose, ctx.params_region, ctx.params) {
  half_ = make_half_allreduce(ctx.algorithm.wire, ctx.hood, ctx.device.host_memory(),
                              ctx.transport_config, ctx.seed);
}

ExactAverage::ExactAverage(membership::Neighborhood& hood, unsigned purpose,
                           transport::Region& region, std::span<float> data)
    : hood_(hood), region_(region), params_(data), purpose_(purpose), layout_(hood.transport()) {}

double ExactAverage::run(std::int64_t round, std::size_t offset, std::size_t count) {
  Stopwatch watch;
  const transport::Tag tag = layout_.make(purpose_, round);
  if (half_) {
    half_->run(params_.subspan(offset, count), transport::ReduceOp::kAverage, tag);
    averaged_ = true;
  } else {
    averaged_ = hood_.average(region_, params_.subspan(offset, count), tag, round);
  }
  return watch.seconds();
}

AllreduceAveraging::AllreduceAveraging(const AveragingContext& ctx)
    : local_steps_(ctx.algorithm.local_steps),
      average_(ctx),
      gradients_(ctx.algorithm.average == "gradients"),
      overlap_(ctx.algorithm.overlap),
      bucket_floats_(std::max<std::size_t>(
          1, static_cast<std::size_t>(ctx.algorithm.bucket_mb * (1 << 20) / sizeof(float)))),
      hood_(ctx.hood),
      purpose_(ctx.purpose),
      params_(ctx.params),
      wire_(ctx.algorithm.wire),
      host_memory_(ctx.device.host_memory()),
      transport_config_(ctx.transport_config),
      seed_(ctx.seed) {
  // The combinations are checked by check_algorithm (algorithms.cc) before this runs.
  if (ctx.algorithm.sparsify.name == "dgc") {
    const OptimizerConfig optimizer = ctx.optimizer ? *ctx.optimizer : OptimizerConfig{};
    check_sparsify(ctx.algorithm, optimizer, ctx.device.host_memory());
    dgc_ = std::make_unique<DeepGradientCompression>(
        ctx.algorithm.sparsify, optimizer, hood_.transport().world_size(), ctx.params.size());
    sparse_ = std::make_unique<transport::SparseAllreduce>(
        hood_.transport(), ctx.params.size(), transport::collective_options(ctx.transport_config));
  }
}

AllreduceAveraging::~AllreduceAveraging() {
  // A job still waiting for gradients that will not come (backward threw) must not hold up the
  // communication thread's join: it gives up at its next bucket.
  {
    std::lock_guard lock(mutex_);
    abandoned_ = true;
  }
  ready_cv_.notify_all();
}

void AllreduceAveraging::after_step(std::int64_t step) {
  if (gradients_) return;  // averaged before the step, in average_gradients()
  if (step % local_steps_ != 0) return;
  // Synchronous data-parallel SGD: x_i <- (1/n) sum_j x_j, the same model on every rank.
  // The whole call is blocked on the ring, so it is all waiting as well as communication.
  const double s = average_.run(step / local_steps_);
  stats_.comm_s += s;
  stats_.wait_s += s;
}

void AllreduceAveraging::attach_gradients(std::span<float> grads, transport::Region& region) {
  grads_average_.emplace(hood_, purpose_, region, grads);
  grads_average_->set_half_wire(make_half_allreduce(wire_, hood_, host_memory_, transport_config_,
                                                    seed_ + 1));
  grads_ = grads;
  buckets_.clear();
  // Tensor fusion: fixed-size buckets of the flat arena, whatever tensors they cut, so a
  // bucket's allreduce pays its latency once for many small tensors (biases) as well.
  const std::size_t size = overlap_ ? bucket_floats_ : grads.size();
  for (std::size_t hi = grads.size(); hi > 0;) {
    const std::size_t lo = hi > size ? hi - size : 0;
    buckets_.push_back({lo, hi});
    hi = lo;
  }
}

void AllreduceAveraging::grads_ready(std::int64_t step, std::size_t offset) {
  if (!gradients_ || !overlap_) return;
  bool start = false;
  {
    std::lock_guard lock(mutex_);
    if (!started_) {
      started_ = start = true;
      backward_done_ = false;
      ready_from_ = kNotReady;
    }
    ready_from_ = std::min(ready_from_, offset);
    if (offset == 0) backward_done_ = true;
  }
  ready_cv_.notify_one();
  if (start) comm_.start([this, step] { average_buckets(step); });
}

void AllreduceAveraging::average_buckets(std::int64_t step) {
  Stopwatch watch;
  const auto rounds = static_cast<std::int64_t>(buckets_.size());
  for (std::int64_t k = 0; k < rounds; ++k) {
    const Bucket& b = buckets_[static_cast<std::size_t>(k)];
    {
      std::unique_lock lock(mutex_);
      ready_cv_.wait(lock, [&] { return ready_from_ <= b.lo || abandoned_; });
      if (abandoned_) return;
      if (!backward_done_) ++in_backward_;
      ++averaged_;
    }
    grads_average_->run(step * rounds + k, b.lo, b.hi - b.lo);
  }
  job_s_ = watch.seconds();
}

void AllreduceAveraging::average_gradients(std::int64_t step) {
  if (!gradients_) return;
  if (!grads_average_) {
    throw Error("algorithm.average = gradients: no gradients attached (murmur-peer and "
                "murmur-sim attach the model's; the API averages parameters only)");
  }
  if (dgc_) {
    // DGC: the top of this peer's accumulated gradient, averaged sparse (zeros elsewhere).
    Stopwatch watch;
    dgc_->compress(step, grads_, params_, sparse_index_, sparse_value_);
    const double compress_s = watch.seconds();
    const transport::SparseAllreduceStats sent = sparse_->run(
        sparse_index_, sparse_value_, grads_, transport::ReduceOp::kAverage,
        transport::TagLayout(hood_.transport()).make(purpose_, step));
    const double s = watch.seconds();
    std::lock_guard lock(mutex_);
    ++averaged_;
    pairs_sent_ += static_cast<std::int64_t>(sparse_index_.size());
    went_dense_ += sent.went_dense;
    // The selection is averaging's work but not waiting: only the exchange waits on others.
    stats_.comm_s += s;
    stats_.wait_s += s - compress_s;
    return;
  }
  if (!overlap_) {
    // DDP without its hooks: one allreduce of the whole gradient, after backward.
    const double s = grads_average_->run(step);
    {
      std::lock_guard lock(mutex_);
      ++averaged_;
    }
    stats_.comm_s += s;
    stats_.wait_s += s;
    return;
  }
  grads_ready(step, 0);  // a backward that never reported still starts (and ends) its job
  const double waited = comm_.wait();
  std::lock_guard lock(mutex_);
  started_ = false;
  // comm_s: the exchange's whole time; wait_s: the part the step saw (exposed).
  stats_.comm_s += job_s_;
  stats_.wait_s += waited;
}

std::int64_t AllreduceAveraging::buckets_started_in_backward() const {
  std::lock_guard lock(mutex_);
  return in_backward_;
}

std::vector<std::pair<std::string, std::span<float>>> AllreduceAveraging::state() {
  if (!dgc_) return {};
  return {{"dgc_momentum", dgc_->momentum()}, {"dgc_residual", dgc_->residual()}};
}

std::int64_t AllreduceAveraging::buckets_averaged() const {
  std::lock_guard lock(mutex_);
  return averaged_;
}

}  // namespace murmur::optimizers
