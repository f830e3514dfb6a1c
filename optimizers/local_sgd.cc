#include "optimizers/local_sgd.h"

namespace murmur::optimizers {

namespace {
constexpr std::string_view kKeys[] = {"local_steps", "switch_step", "wire"};
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
    }};

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
