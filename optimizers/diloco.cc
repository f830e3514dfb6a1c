#include "optimizers/diloco.h"

#include "core/stopwatch.h"

namespace murmur::optimizers {

namespace {
constexpr std::string_view kKeys[] = {"local_steps", "outer_lr", "outer_momentum"};
}  // namespace

const AlgorithmInfo kDiloco{
    .name = "diloco",
    .summary = "DiLoCo (Douillard et al. 2023): H inner steps, then an outer Nesterov step on "
               "the averaged pseudo-gradient",
    .needs = GraphNeeds::kNone,
    .keys = kKeys,
    .make = [](const AveragingContext& c) -> std::unique_ptr<Averaging> {
      return std::make_unique<Diloco>(c);
    }};

Diloco::Diloco(const AveragingContext& ctx)
    : device_(ctx.device),
      local_steps_(ctx.algorithm.local_steps),
      outer_lr_(static_cast<float>(ctx.algorithm.outer_lr)),
      outer_momentum_(static_cast<float>(ctx.algorithm.outer_momentum)),
      params_(ctx.params),
      average_(ctx),
      global_(ctx.device.zeros(ctx.params.size())),
      momentum_(ctx.device.zeros(ctx.params.size())),
      delta_(ctx.device.zeros(ctx.params.size())) {
  device_.copy(global_.span(), params_);
}

void Diloco::after_step(std::int64_t step) {
  if (step % local_steps_ != 0) return;
  Stopwatch watch;
  const double blocked = average_.run(step / local_steps_);
  // Douillard et al. 2023, Algorithm 1: Delta = theta^(t-1) - (1/k) sum_i theta_i^(t) (the
  // averaged pseudo-gradient; averaging the models is averaging the deltas), then the outer
  // step theta^(t) = OuterOpt(theta^(t-1), Delta) with Nesterov momentum, as torch.optim.SGD:
  // m <- mu m + Delta; theta <- theta - lr (Delta + mu m); the peers go on from theta.
  const std::span<float> delta = delta_.span(), theta = global_.span(), m = momentum_.span();
  device_.copy(delta, theta);
  device_.axpy(delta, -1.0f, params_);
  device_.axpby(m, 1.0f, delta, outer_momentum_);
  device_.axpy(delta, outer_momentum_, m);  // Delta + mu m
  device_.axpy(theta, -outer_lr_, delta);
  device_.copy(params_, theta);
  stats_.comm_s += watch.seconds();
  stats_.wait_s += blocked;
}

std::vector<std::pair<std::string, std::span<float>>> Diloco::state() {
  return {{"diloco.global", global_.span()}, {"diloco.momentum", momentum_.span()}};
}

}  // namespace murmur::optimizers
