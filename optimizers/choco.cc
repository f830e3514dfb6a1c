#include "optimizers/choco.h"

#include "core/stopwatch.h"
#include "optimizers/exchange.h"
#include "topology/mixing.h"

namespace murmur::optimizers {

namespace {
constexpr std::string_view kKeys[] = {"local_steps", "consensus_lr", "compressor"};
std::size_t floats_for(std::size_t bytes) { return (bytes + sizeof(float) - 1) / sizeof(float); }
}  // namespace

const AlgorithmInfo kChoco{
    .name = "choco",
    .summary = "CHOCO-SGD (Koloskova et al. 2019): gossip of compressed differences with error "
               "compensation",
    .needs = GraphNeeds::kDoublyStochastic,
    .static_graph_only = true,
    .compresses = true,
    .keys = kKeys,
    .make = [](const AveragingContext& c) -> std::unique_ptr<Averaging> {
      return std::make_unique<Choco>(c);
    }};

Choco::Choco(const AveragingContext& ctx)
    : hood_(ctx.hood),
      device_(ctx.device),
      params_(ctx.params),
      local_steps_(ctx.algorithm.local_steps),
      gamma_(static_cast<float>(ctx.algorithm.consensus_lr)),
      purpose_(ctx.purpose),
      layout_(ctx.hood.transport()),
      mixing_(topology::rank_mixing(ctx.topology, ctx.hood.transport().world_size(),
                                    ctx.hood.transport().rank(), ctx.seed, 0)),
      compressor_(make_compressor(ctx.algorithm.compressor)),
      contraction_(static_cast<float>(compressor_->contraction_scale(ctx.params.size()))),
      rng_(Rng(ctx.seed ^ 0xC0C0ull).fork(static_cast<std::uint64_t>(ctx.hood.transport().rank()))),
      xhat_(ctx.device.zeros(ctx.params.size())),
      s_(ctx.device.zeros(ctx.params.size())),
      diff_(ctx.device.zeros(ctx.params.size())),
      send_(compressor_->max_bytes(ctx.params.size())),
      slots_(ctx.hood.transport(), device::cpu(), floats_for(send_.size())) {
  send_region_ = hood_.transport().register_region(send_);
  slots_.reserve(std::max<std::size_t>(1, mixing_.recv_from.size()));
  if (!device_.host_memory()) {
    host_.assign(params_.size(), 0.0f);
    decoded_ = device_.zeros(params_.size());
  }
}

void Choco::add_decoded(std::span<float> target,
                        std::span<const std::pair<std::span<const std::byte>, float>> messages) {
  if (device_.host_memory()) {
    for (const auto& [message, scale] : messages) compressor_->decode_add(message, scale, target);
    return;
  }
  std::fill(host_.begin(), host_.end(), 0.0f);
  for (const auto& [message, scale] : messages) compressor_->decode_add(message, scale, host_);
  device_.upload(decoded_.span(), host_);
  device_.axpy(target, 1.0f, decoded_.span());
}

void Choco::after_step(std::int64_t step) {
  if (step % local_steps_ != 0) return;
  const std::int64_t round = step / local_steps_ - 1;
  Stopwatch watch;
  // Koloskova et al. 2019, Algorithm 2 (CHOCO-SGD), lines 4-9, after the local step (line 3):
  // q_i = Q(x_i - x^_i); send q_i, receive q_j; x^_j += q_j for j in N_i and i itself
  // (kept here as s_i = sum_j W_ij x^_j); x_i += gamma (s_i - x^_i).
  const std::span<float> diff = diff_.span();
  device_.add_scaled_diff(diff, 1.0f, params_, xhat_.span());  // diff is 0 on entry: x - x^
  std::span<const float> plain = diff;
  if (!device_.host_memory()) {
    device_.download(host_, diff);
    plain = host_;
  }
  const std::size_t bytes = compressor_->encode(plain, send_, rng_);
  device_.fill(diff, 0.0f);
  Stopwatch blocked;
  const auto got = exchange(hood_, layout_.make(purpose_, round), *send_region_, {0, bytes},
                            mixing_.send_to, slots_, mixing_.recv_from, /*exact_size=*/false);
  stats_.wait_s += blocked.seconds();
  const std::span<const std::byte> own(send_.data(), bytes);
  const std::pair<std::span<const std::byte>, float> own_only[] = {{own, contraction_}};
  add_decoded(xhat_.span(), own_only);
  std::vector<std::pair<std::span<const std::byte>, float>> into_s;
  into_s.emplace_back(own, contraction_ * static_cast<float>(mixing_.self_weight));
  for (std::size_t k = 0; k < got.size(); ++k) {
    // A lost neighbor sends no more: its public copy stays in s as last seen (W is fixed).
    if (got[k] == kLost) continue;
    into_s.emplace_back(std::as_bytes(slots_.slot(k)).first(got[k]),
                        contraction_ * static_cast<float>(mixing_.recv_weights[k]));
  }
  add_decoded(s_.span(), into_s);
  device_.add_scaled_diff(params_, gamma_, s_.span(), xhat_.span());
  stats_.comm_s += watch.seconds();
}

std::vector<std::pair<std::string, std::span<float>>> Choco::state() {
  return {{"choco.xhat", xhat_.span()}, {"choco.s", s_.span()}};
}

}  // namespace murmur::optimizers
