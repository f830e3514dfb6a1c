#include "optimizers/local_sgd.h"

#include <cmath>
#include "optimizers/wire.h"

namespace murmur::optimizers {

namespace {
constexpr std::string_view kKeys[] = {"local_steps", "switch_step", "wire"};
}  // namespace

namespace {
// The exact average every step before switch_step, every H steps after it.
CommPlan plan_local_sgd(const PlanContext& c) {
  const AlgorithmConfig& a = c.config.algorithm;
  const double steps = static_cast<double>(std::max<std::int64_t>(1, c.steps));
  const double early = std::min(steps, static_cast<double>(a.switch_step));
  const double per_step =
      (early + std::floor((steps - early) / a.local_steps)) / steps;
  const double bytes = static_cast<double>(c.parameters) * (half_wire(a.wire) ? 2 : 4);
  return {allreduce_parts("allreduce of the parameters", bytes, c.config.world.size,
                          static_cast<double>(c.config.transport.chunk_bytes), per_step,
                          half_wire(a.wire).has_value()), ""};
}
}  // namespace

const AlgorithmInfo kLocalSgd{
    .name = "local_sgd",
    .summary = "local SGD (Lin et al. 2020): H local steps, then an exact average; post-local "
               "SGD with switch_step",
    .needs = GraphNeeds::kNone,
    .rejoins = RejoinPolicy::kAgreed,
    .keys = kKeys,
    .make = [](const AveragingContext& c) -> std::unique_ptr<Averaging> {
      return std::make_unique<LocalSgd>(c);
    },
    .plan = plan_local_sgd};

LocalSgd::LocalSgd(const AveragingContext& ctx)
    : local_steps_(ctx.algorithm.local_steps),
      switch_step_(ctx.algorithm.switch_step),
      average_(ctx) {}

void LocalSgd::after_step(std::int64_t step) {
  // Lin et al. 2020, eq. (2) (post-local SGD): H_t = 1 for t < t', H_t = H afterwards; an
  // average ends each block of H_t local steps. The step number is the round, so every rank
  // agrees on the tag without keeping state (resume needs nothing).
  const bool average = step < switch_step_ || step % local_steps_ == 0;
  if (!average) return;
  const double s = average_.run(step);
  stats_.comm_s += s;
  stats_.wait_s += s;
}

}  // namespace murmur::optimizers
