#include "optimizers/allreduce.h"

namespace murmur::optimizers {

ExactAverage::ExactAverage(const AveragingContext& ctx)
    : region_(ctx.params_region),
      params_(ctx.params),
      allreduce_(ctx.transport, collective_options(ctx.transport_config)) {
  if (ctx.live) {
    live_ = std::make_unique<LiveAllreduce>(ctx.transport, *ctx.live,
                                            collective_options(ctx.transport_config));
  }
}

double ExactAverage::run(ReducePurpose purpose, std::int64_t round) {
  Stopwatch watch;
  if (live_) {
    live_->average(region_, params_, allreduce_tag(purpose, round), round);
  } else {
    allreduce_.run(region_, params_, transport::ReduceOp::kAverage, allreduce_tag(purpose, round));
  }
  return watch.seconds();
}

AllreduceAveraging::AllreduceAveraging(const AveragingContext& ctx)
    : local_steps_(ctx.algorithm.local_steps), average_(ctx) {}

void AllreduceAveraging::after_step(std::int64_t step) {
  if (step % local_steps_ != 0) return;
  // Synchronous data-parallel SGD: x_i <- (1/n) sum_j x_j, the same model on every rank.
  // The whole call is blocked on the ring, so it is all waiting as well as communication.
  const double s = average_.run(ReducePurpose::kAllreduce, step / local_steps_);
  stats_.comm_s += s;
  stats_.wait_s += s;
}

}  // namespace murmur::optimizers
