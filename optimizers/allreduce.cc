#include "optimizers/allreduce.h"

#include "core/stopwatch.h"

namespace murmur::optimizers {

namespace {
constexpr std::string_view kKeys[] = {"local_steps", "hierarchical"};
}  // namespace

const AlgorithmInfo kAllreduce{
    .name = "allreduce",
    .summary = "exact average every H steps (ring allreduce): the synchronous baseline",
    .needs = GraphNeeds::kNone,
    .rejoins = RejoinPolicy::kAgreed,
    .keys = kKeys,
    .make = [](const AveragingContext& c) -> std::unique_ptr<Averaging> {
      return std::make_unique<AllreduceAveraging>(c);
    }};

ExactAverage::ExactAverage(const AveragingContext& ctx)
    : hood_(ctx.hood),
      region_(ctx.params_region),
      params_(ctx.params),
      purpose_(ctx.purpose),
      layout_(ctx.hood.transport()) {}

double ExactAverage::run(std::int64_t round) {
  Stopwatch watch;
  averaged_ = hood_.average(region_, params_, layout_.make(purpose_, round), round);
  return watch.seconds();
}

AllreduceAveraging::AllreduceAveraging(const AveragingContext& ctx)
    : local_steps_(ctx.algorithm.local_steps), average_(ctx) {}

void AllreduceAveraging::after_step(std::int64_t step) {
  if (step % local_steps_ != 0) return;
  // Synchronous data-parallel SGD: x_i <- (1/n) sum_j x_j, the same model on every rank.
  // The whole call is blocked on the ring, so it is all waiting as well as communication.
  const double s = average_.run(step / local_steps_);
  stats_.comm_s += s;
  stats_.wait_s += s;
}

}  // namespace murmur::optimizers
