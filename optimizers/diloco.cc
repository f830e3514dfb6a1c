#include "optimizers/diloco.h"

#include "optimizers/mixing_ops.h"

namespace murmur::optimizers {

Diloco::Diloco(const AveragingContext& ctx)
    : local_steps_(ctx.algorithm.local_steps),
      outer_lr_(static_cast<float>(ctx.algorithm.outer_lr)),
      outer_momentum_(static_cast<float>(ctx.algorithm.outer_momentum)),
      params_(ctx.params),
      average_(ctx),
      global_(ctx.params.begin(), ctx.params.end()),
      momentum_(ctx.params.size(), 0.0f) {}

void Diloco::after_step(std::int64_t step) {
  if (step % local_steps_ != 0) return;
  Stopwatch watch;
  const double blocked = average_.run(ReducePurpose::kDiloco, step / local_steps_);
  // Douillard et al. 2023, Algorithm 1: Delta = theta^(t-1) - (1/k) sum_i theta_i^(t) (the
  // averaged pseudo-gradient; averaging the models is averaging the deltas), then the outer
  // step theta^(t) = OuterOpt(theta^(t-1), Delta) with Nesterov momentum, as torch.optim.SGD:
  // m <- mu m + Delta; theta <- theta - lr (Delta + mu m).
  const float mu = outer_momentum_, lr = outer_lr_;
  float* __restrict theta = global_.data();
  float* __restrict m = momentum_.data();
  float* __restrict x = params_.data();
  for (std::size_t i = 0, n = params_.size(); i < n; ++i) {
    const float delta = theta[i] - x[i];
    m[i] = mu * m[i] + delta;
    theta[i] -= lr * (delta + mu * m[i]);
    x[i] = theta[i];
  }
  stats_.comm_s += watch.seconds();
  stats_.wait_s += blocked;
}

std::vector<std::pair<std::string, std::span<float>>> Diloco::state() {
  return {{"diloco.global", global_}, {"diloco.momentum", momentum_}};
}

}  // namespace murmur::optimizers
