#include "optimizers/dpsgd.h"

#include "core/stopwatch.h"
#include "optimizers/bounded_staleness.h"
#include "optimizers/device_arrays.h"
#include "optimizers/exchange.h"
#include "optimizers/wire.h"

namespace murmur::optimizers {

namespace {
constexpr std::string_view kKeys[] = {"local_steps", "overlap", "hierarchical", "max_staleness", "wire"};
}  // namespace

namespace {
// x to every out-neighbor each step (bounded staleness too); a 16-bit wire halves it.
CommPlan plan_dpsgd(const PlanContext& c) {
  const double bytes = static_cast<double>(c.parameters) * (half_wire(c.config.algorithm.wire) ? 2 : 4);
  return {{neighbor_part("the parameters to each out-neighbor", c, bytes, 1)}, ""};
}
}  // namespace

const AlgorithmInfo kDpsgd{
    .name = "dpsgd",
    .summary = "D-PSGD (Lian et al. 2017): average with this round's neighbors after every H steps",
    .needs = GraphNeeds::kDoublyStochastic,
    .overlaps = true,
    .rejoins = RejoinPolicy::kPerPair,
    .keys = kKeys,
    .make = [](const AveragingContext& c) -> std::unique_ptr<Averaging> {
      if (c.algorithm.max_staleness > 0) return std::make_unique<BoundedStaleness>(c);
      return std::make_unique<Dpsgd>(c);
    },
    .plan = plan_dpsgd};

Dpsgd::Dpsgd(const AveragingContext& ctx)
    : hood_(ctx.hood),
      device_(ctx.device),
      params_region_(ctx.params_region),
      params_(ctx.params),
      local_steps_(ctx.algorithm.local_steps),
      overlap_(ctx.algorithm.overlap),
      purpose_(ctx.purpose),
      layout_(ctx.hood.transport()),
      schedule_(ctx.topology, ctx.hood.transport().world_size(), ctx.hood.transport().rank(),
                ctx.seed),
      slots_(ctx.hood.transport(), ctx.device, ctx.params.size()),
      half_(half_wire(ctx.algorithm.wire)),
      stochastic_(ctx.algorithm.wire.rounding == "stochastic"),
      rng_(Rng(ctx.seed).fork(0x77697265u + static_cast<std::uint64_t>(ctx.hood.transport().rank()))) {
  // The fp32 slots only without the 16-bit wire, which receives into half_slots_.
  if (!half_) slots_.reserve(std::max<std::size_t>(1, schedule_.at(0).recv_from.size()));
  if (half_) {
    check_wire_device(ctx.algorithm.wire, device_.host_memory());
    // Two 16-bit values per float of a slot: an odd count sends one padding value.
    const std::size_t halves = (params_.size() + 1) / 2;
    narrow_.assign(2 * halves, 0);
    narrow_region_ = hood_.transport().register_region(std::as_writable_bytes(std::span(narrow_)));
    own_.resize(params_.size());
    theirs_.resize(params_.size());
    half_slots_.emplace(hood_.transport(), device_, halves);
    half_slots_->reserve(std::max<std::size_t>(1, schedule_.at(0).recv_from.size()));
  }
  if (overlap_) {
    snapshot_ = device_.zeros(params_.size());
    snapshot_region_ = register_array(hood_.transport(), device_, snapshot_.span());
    comm_ = std::make_unique<CommThread>();
  }
}

Dpsgd::~Dpsgd() = default;

void Dpsgd::after_step(std::int64_t step) {
  if (step % local_steps_ != 0) return;
  const std::int64_t round = step / local_steps_ - 1;
  const transport::Tag tag = layout_.make(purpose_, round);
  const transport::ByteRange all{0, params_.size_bytes()};
  Stopwatch watch;
  if (!overlap_) {
    const topology::RankMixing m = renormalize(schedule_.at(round), hood_, step, Renormalize::kRow);
    if (half_) {
      exchange_half(tag, m);
      stats_.comm_s += watch.seconds();
      return;
    }
    Stopwatch blocked;
    const auto got = exchange(hood_, tag, params_region_, all, m.send_to, slots_, m.recv_from);
    stats_.wait_s += blocked.seconds();
    // x_i <- sum_j W_ij x_j (the gradient step was already taken by the local optimizer on
    // x_i, the order Lian et al.'s eq. (3) allows).
    mix_received(device_, params_, m, got, slots_, inputs_, weights_);
  } else {
    apply_pending();
    device_.copy(snapshot_.span(), params_);
    inflight_ = renormalize(schedule_.at(round), hood_, step, Renormalize::kRow);
    pending_ = true;
    comm_->start([this, tag, all] {
      inflight_got_ = exchange(hood_, tag, *snapshot_region_, all, inflight_.send_to, slots_,
                               inflight_.recv_from);
    });
  }
  stats_.comm_s += watch.seconds();
}

void Dpsgd::exchange_half(transport::Tag tag, const topology::RankMixing& m) {
  narrow(params_, std::span(narrow_).first(params_.size()), *half_, stochastic_ ? &rng_ : nullptr);
  widen(std::span(narrow_).first(params_.size()), own_, *half_);
  Stopwatch blocked;
  const auto got = exchange(hood_, tag, *narrow_region_, {0, narrow_.size() * 2}, m.send_to,
                            *half_slots_, m.recv_from);
  stats_.wait_s += blocked.seconds();
  // x_i += sum_j W_ij (q(x_j) - q(x_i)): with no rounding, W_ii x_i + sum_j W_ij x_j; a lost
  // neighbor's weight stays with x_i.
  for (std::size_t k = 0; k < m.recv_from.size(); ++k) {
    if (got[k] == kLost) continue;
    const std::span<float> slot = half_slots_->slot(k);
    widen(std::span(reinterpret_cast<const std::uint16_t*>(slot.data()), params_.size()), theirs_,
          *half_);
    device_.add_scaled_diff(params_, static_cast<float>(m.recv_weights[k]), theirs_, own_);
  }
}

void Dpsgd::apply_pending() {
  if (!pending_) return;
  stats_.wait_s += comm_->wait();
  pending_ = false;
  // The overlapped D-PSGD update: the round's mixing computed on the snapshot x' and added as
  // a difference, x_i += sum_{j != i} W_ij (x_j' - x_i'), so the local step taken meanwhile is
  // kept. For doubly stochastic W the differences cancel over peers: the mean is exact.
  for (std::size_t k = 0; k < inflight_.recv_from.size(); ++k) {
    if (inflight_got_[k] == kLost) continue;  // its weight stays with x_i (a zero difference)
    device_.add_scaled_diff(params_, static_cast<float>(inflight_.recv_weights[k]), slots_.slot(k),
                            snapshot_.span());
  }
}

void Dpsgd::flush() {
  Stopwatch watch;
  if (overlap_) apply_pending();
  stats_.comm_s += watch.seconds();
}

}  // namespace murmur::optimizers
