#include "optimizers/local_sgd.h"

namespace murmur::optimizers {

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
  const double s = average_.run(ReducePurpose::kLocalSgd, step);
  stats_.comm_s += s;
  stats_.wait_s += s;
}

}  // namespace murmur::optimizers
