#include "optimizers/easgd.h"

#include "core/stopwatch.h"
#include "optimizers/device_arrays.h"
#include "optimizers/exchange.h"

namespace murmur::optimizers {

namespace {
constexpr std::string_view kKeys[] = {"local_steps", "elastic_beta"};
}  // namespace

namespace {
// The center copy z to every out-neighbor every H steps, as D-PSGD sends x.
CommPlan plan_easgd(const PlanContext& c) {
  const double bytes = static_cast<double>(c.parameters) * 4;
  return {{neighbor_part("the center copy to each out-neighbor", c, bytes,
                         every_steps(c.config.algorithm.local_steps, c.steps))}, ""};
}
}  // namespace

const AlgorithmInfo kEasgd{
    .name = "easgd",
    .summary = "elastic averaging (Zhang et al. 2015) without a center: the peers gossip their "
               "copies of the center every H steps, pulled by and pulling their models",
    .needs = GraphNeeds::kDoublyStochastic,
    .rejoins = RejoinPolicy::kPerPair,
    .keys = kKeys,
    .make = [](const AveragingContext& c) -> std::unique_ptr<Averaging> {
      return std::make_unique<Easgd>(c);
    },
    .plan = plan_easgd};

Easgd::Easgd(const AveragingContext& ctx)
    : hood_(ctx.hood),
      device_(ctx.device),
      params_(ctx.params),
      local_steps_(ctx.algorithm.local_steps),
      alpha_(static_cast<float>(ctx.algorithm.elastic_beta / ctx.hood.transport().world_size())),
      beta_(static_cast<float>(ctx.algorithm.elastic_beta)),
      purpose_(ctx.purpose),
      layout_(ctx.hood.transport()),
      schedule_(ctx.topology, ctx.hood.transport().world_size(), ctx.hood.transport().rank(),
                ctx.seed),
      center_(ctx.device.zeros(ctx.params.size())),
      diff_(ctx.device.zeros(ctx.params.size())),
      slots_(ctx.hood.transport(), ctx.device, ctx.params.size()) {
  device_.copy(center_.span(), params_);
  center_region_ = register_array(hood_.transport(), device_, center_.span());
  slots_.reserve(std::max<std::size_t>(1, schedule_.at(0).recv_from.size()));
}

void Easgd::after_step(std::int64_t step) {
  if (step % local_steps_ != 0) return;
  const std::int64_t round = step / local_steps_ - 1;
  Stopwatch watch;
  const std::span<float> z = center_.span(), d = diff_.span();
  // The gossip of the copies of the center, as D-PSGD's of the models.
  const topology::RankMixing m = renormalize(schedule_.at(round), hood_, step, Renormalize::kRow);
  Stopwatch blocked;
  const auto got = exchange(hood_, layout_.make(purpose_, round), *center_region_,
                            {0, z.size_bytes()}, m.send_to, slots_, m.recv_from);
  stats_.wait_s += blocked.seconds();
  mix_received(device_, z, m, got, slots_, inputs_, weights_);
  // Zhang et al. 2015, eq. (5)-(6) with this peer's z for the center: x_i moves by alpha d
  // towards it, z_i by beta d = p alpha d towards x_i, so p x_i + z_i is unchanged.
  device_.copy(d, params_);
  device_.axpy(d, -1.0f, z);
  device_.axpy(params_, -alpha_, d);
  device_.axpy(z, beta_, d);
  stats_.comm_s += watch.seconds();
}

bool Easgd::debiased(std::span<float> out) {
  device_.copy(out, center_.span());
  return true;
}

void Easgd::rejoined() { device_.copy(center_.span(), params_); }

std::vector<std::pair<std::string, std::span<float>>> Easgd::state() {
  return {{"easgd.center", center_.span()}};
}

}  // namespace murmur::optimizers
