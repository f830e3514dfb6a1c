#include "optimizers/pairwise.h"

#include <algorithm>
#include <numeric>

#include "core/crc32c.h"
#include "core/rng.h"
#include "core/stopwatch.h"
#include "optimizers/device_arrays.h"
#include "optimizers/exchange.h"
#include "topology/schedule.h"

namespace murmur::optimizers {

namespace {
constexpr std::string_view kKeys[] = {"local_steps", "overlap", "one_sided"};
}  // namespace

namespace {
// Each round, the model to this round's partner (a matching: one partner at most).
CommPlan plan_pairwise(const PlanContext& c) {
  const double bytes = static_cast<double>(c.parameters) * 4;
  return {{{"the parameters to this round's partner", every_steps(c.config.algorithm.local_steps, c.steps), 1,
            bytes, bytes}}, ""};
}
}  // namespace

const AlgorithmInfo kPairwise{
    .name = "pairwise",
    .summary = "pairwise gossip in rounds: AD-PSGD's averaging with one neighbor of a matching "
               "per round, in lockstep, on a communication thread",
    .needs = GraphNeeds::kAny,
    .overlaps = true,  // always: its exchange runs on the communication thread
    .rejoins = RejoinPolicy::kPerPair,
    .keys = kKeys,
    .make = [](const AveragingContext& c) -> std::unique_ptr<Averaging> {
      return std::make_unique<Pairwise>(c);
    },
    .plan = plan_pairwise};

int pairwise_partner(const topology::Graph& g, std::uint64_t seed, std::int64_t round, int rank) {
  const int n = g.n;
  const std::vector<std::vector<int>> adj = topology::undirected_neighbors(g);
  Rng rng = Rng(seed ^ 0xAD95D0ull).fork(static_cast<std::uint64_t>(round));
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  for (int i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
  std::vector<int> partner(n, -1);
  std::vector<int> free;
  for (int i : order) {
    if (partner[i] >= 0) continue;
    free.clear();  // ascending, as adj[i] is
    for (int j : adj[i]) {
      if (partner[j] < 0) free.push_back(j);
    }
    if (free.empty()) continue;
    const int j = free[rng.below(free.size())];
    partner[i] = j;
    partner[j] = i;
  }
  return partner[rank];
}

Pairwise::Pairwise(const AveragingContext& ctx)
    : hood_(ctx.hood),
      device_(ctx.device),
      params_(ctx.params),
      topology_(ctx.topology),
      seed_(ctx.seed),
      local_steps_(ctx.algorithm.local_steps),
      purpose_(ctx.purpose),
      layout_(ctx.hood.transport()),
      snapshot_(ctx.device.zeros(ctx.params.size())),
      slots_(ctx.hood.transport(), ctx.device, ctx.params.size()),
      comm_(std::make_unique<CommThread>()) {
  snapshot_region_ = register_array(hood_.transport(), device_, snapshot_.span());
  slots_.reserve(1);
  if (ctx.algorithm.one_sided) {
    // A partner may be any neighbor of the graph, either way: one window slot for each.
    const transport::Transport& t = hood_.transport();
    std::vector<int> sources, targets;
    schedule_neighbors(topology_, t.world_size(), t.rank(), seed_, sources, targets);
    sources.insert(sources.end(), targets.begin(), targets.end());
    std::sort(sources.begin(), sources.end());
    sources.erase(std::unique(sources.begin(), sources.end()), sources.end());
    windows_ = std::make_unique<PutWindows>(hood_, device_, params_.size(), 1, sources, sources,
                                            purpose_);
  }
}

Pairwise::~Pairwise() { comm_.reset(); }

void Pairwise::after_step(std::int64_t step) {
  if (step % local_steps_ != 0) return;
  const std::int64_t round = step / local_steps_ - 1;
  Stopwatch watch;
  apply_pending();
  const transport::Transport& t = hood_.transport();
  partner_ = pairwise_partner(topology::graph_at(topology_, t.world_size(), seed_, round), seed_,
                              round, t.rank());
  if (partner_ >= 0 && !hood_.alive(partner_, step)) partner_ = -1;
  if (partner_ >= 0) {
    device_.copy(snapshot_.span(), params_);
    pending_ = true;
    const transport::Tag tag = layout_.make(purpose_, round);
    round_ = round;
    comm_->start([this, tag] {
      const int peer[1] = {partner_};
      const transport::ByteRange all{0, params_.size_bytes()};
      if (!windows_) {
        got_ = exchange(hood_, tag, *snapshot_region_, all, peer, slots_, peer)[0] != kLost;
        return;
      }
      windows_->expect(partner_, round_);
      const std::uint32_t crc = crc32c(std::as_bytes(std::span<const float>(snapshot_.span())));
      got_ = windows_->put(partner_, round_, *snapshot_region_, all, crc);
      if (got_) landed_ = windows_->landed(partner_, round_);
      got_ = got_ && !landed_.empty();
      windows_->wait_sent(round_);  // the snapshot is rewritten next round
    });
  }
  stats_.comm_s += watch.seconds();
}

void Pairwise::apply_pending() {
  if (!pending_) return;
  stats_.wait_s += comm_->wait();
  pending_ = false;
  if (!got_) return;  // the partner was lost: this round is skipped
  // Lian et al. 2018, Algorithm 1, line 6: x_i, x_j <- (x_i + x_j) / 2 on the values read at
  // the exchange; the local step taken since is kept: x_i += (x_j' - x_i') / 2.
  if (windows_) {
    device_.add_scaled_diff(params_, 0.5f, landed_, snapshot_.span());
    windows_->release(partner_, round_);  // the exchange's thread is idle: ours to drive
    return;
  }
  device_.add_scaled_diff(params_, 0.5f, slots_.slot(0), snapshot_.span());
}

void Pairwise::flush() {
  Stopwatch watch;
  apply_pending();
  if (windows_) windows_->finish();
  stats_.comm_s += watch.seconds();
}

}  // namespace murmur::optimizers
