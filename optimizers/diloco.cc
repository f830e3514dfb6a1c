#include "optimizers/diloco.h"

#include <cmath>

#include "core/logging.h"
#include "core/stopwatch.h"
#include "optimizers/device_arrays.h"
#include "transport/tag.h"
#include "optimizers/wire.h"

namespace murmur::optimizers {

namespace {
constexpr std::string_view kKeys[] = {"local_steps", "outer_lr", "outer_momentum", "wire"};
}  // namespace

namespace {
// The exact average of the outer gradient every H steps.
CommPlan plan_diloco(const PlanContext& c) {
  const AlgorithmConfig& a = c.config.algorithm;
  const double bytes = static_cast<double>(c.parameters) * (half_wire(a.wire) ? 2 : 4);
  return {allreduce_parts("allreduce of the outer gradient", bytes, c.config.world.size,
                          static_cast<double>(c.config.transport.chunk_bytes), every_steps(a.local_steps, c.steps),
                          half_wire(a.wire).has_value()),
          ""};
}
}  // namespace

const AlgorithmInfo kDiloco{
    .name = "diloco",
    .summary = "DiLoCo (Douillard et al. 2023): H inner steps, then an outer Nesterov step on "
               "the averaged pseudo-gradient",
    .needs = GraphNeeds::kNone,
    .rejoins = RejoinPolicy::kAgreed,
    .keys = kKeys,
    .make = [](const AveragingContext& c) -> std::unique_ptr<Averaging> {
      return std::make_unique<Diloco>(c);
    },
    .plan = plan_diloco};

Diloco::Diloco(const AveragingContext& ctx)
    : hood_(ctx.hood),
      device_(ctx.device),
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
  const std::int64_t round = step / local_steps_;
  hand_over(round);
  const double blocked = average_.run(round);
  if (!average_.averaged()) {
    // Skipped while the survivors agreed on a ring: no outer step on an unaveraged model (each
    // survivor's would differ). The inner steps go on from here.
    stats_.comm_s += watch.seconds();
    stats_.wait_s += blocked;
    return;
  }
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

void Diloco::rejoined() {
  // The global model the neighbors' parameters came from is not known here: take them as it, so
  // that the rounds alone until the join step are small outer steps, not one across the gap.
  device_.copy(global_.span(), params_);
  device_.fill(momentum_.span(), 0.0f);
}

void Diloco::hand_over(std::int64_t round) {
  if (!hood_.joins_at(round)) return;
  const std::size_t n = params_.size();
  if (!join_region_) {
    join_ = device_.zeros(2 * n + 1);
    join_region_ = register_array(hood_.transport(), device_, join_.span());
  }
  // Those that were there give weight 1, a rank rejoining now 0; the mean over all, divided by
  // the mean weight, is the state of those that were there (the same on each of them).
  const float w = hood_.rejoins_at(round) ? 0.0f : 1.0f;
  const std::span<float> all = join_.span();
  device_.copy(all.first(n), global_.span());
  device_.copy(all.subspan(n, n), momentum_.span());
  device_.scale(all.first(2 * n), w);
  device_.upload(all.subspan(2 * n, 1), std::span<const float>(&w, 1));
  const transport::TagLayout layout(hood_.transport());
  if (!hood_.average_at_join(*join_region_, all, layout.make(transport::purpose::kJoinState, round),
                             round)) {
    return;  // skipped, or the join is off: everyone keeps their own
  }
  float mean_w = 0;
  device_.download(std::span<float>(&mean_w, 1), all.subspan(2 * n, 1));
  if (!(mean_w > 0)) return;  // nobody had been there
  device_.axpby(global_.span(), 1.0f / mean_w, all.first(n), 0.0f);
  device_.axpby(momentum_.span(), 1.0f / mean_w, all.subspan(n, n), 0.0f);
  if (w == 0.0f) {
    const auto ranks = hood_.ranks(round).size();
    log().info("rank {}: at round {}: global model and outer momentum from the {} of {} ranks "
               "that were there", hood_.transport().rank(), round,
               std::lround(mean_w * static_cast<float>(ranks)), ranks);
  }
}

std::vector<std::pair<std::string, std::span<float>>> Diloco::state() {
  return {{"diloco.global", global_.span()}, {"diloco.momentum", momentum_.span()}};
}

}  // namespace murmur::optimizers
