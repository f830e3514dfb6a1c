// network.stragglers as a StepHook (step_hook.h).
#include <chrono>
#include <thread>

#include <fmt/std.h>

#include "core/error.h"
#include "core/logging.h"
#include "runtime/cpu_quota.h"
#include "runtime/step_hook.h"

namespace murmur::runtime {
namespace {

// Steps [from, to) of network.straggler_steps; the whole run when it is empty.
struct Window {
  std::int64_t from = 1;
  std::int64_t to = INT64_MAX;
  bool contains(std::int64_t step) const { return step >= from && step < to; }
};

class SleepingStraggler final : public StepHook {
 public:
  SleepingStraggler(double factor, Window window) : factor_(factor), window_(window) {}
  void after_compute(std::int64_t step, double compute_s) override {
    if (!window_.contains(step)) return;
    std::this_thread::sleep_for(std::chrono::duration<double>((factor_ - 1) * compute_s));
  }

 private:
  double factor_;
  Window window_;
};

// The quota itself is murmur-launch's: it gave this peer its share of the cores, or 1/f of it for
// a straggler of the whole run. A window's straggler switches its own quota between steps.
class QuotaStraggler final : public StepHook {
 public:
  QuotaStraggler(int rank, double factor, Window window, CpuQuota quota)
      : rank_(rank), window_(window), quota_(std::move(quota)), share_(quota_.cores()),
        slow_(share_ / factor) {
    if (share_ <= 0) {
      throw ConfigError(fmt::format("network.stragglers: rank {}'s cgroup {} has no CPU quota to divide",
                                    rank, quota_.dir()));
    }
    apply(1);
  }
  void after_compute(std::int64_t step, double) override { apply(step + 1); }

 private:
  void apply(std::int64_t next_step) {
    const bool slow = window_.contains(next_step);
    if (slow == slow_now_) return;
    quota_.set_cores(slow ? slow_ : share_);
    slow_now_ = slow;
    log().info("rank {}: straggler: from step {}, {:.3f} cores (its share is {:.3f})", rank_, next_step,
               slow ? slow_ : share_, share_);
  }

  int rank_;
  Window window_;
  CpuQuota quota_;
  double share_;
  double slow_;
  bool slow_now_ = false;
};

}  // namespace

std::shared_ptr<StepHook> straggler_hook(const NetworkConfig& network, int rank,
                                         const std::filesystem::path& cpu_cgroup) {
  const auto it = network.stragglers.find(rank);
  if (it == network.stragglers.end() || it->second <= 1) return nullptr;
  const double factor = it->second;
  Window window;
  if (network.straggler_steps.size() == 2) window = {network.straggler_steps[0], network.straggler_steps[1]};
  const std::string when = network.straggler_steps.size() == 2
                               ? fmt::format("steps {} to {}", window.from, window.to - 1)
                               : std::string("the whole run");
  if (network.straggler_mode == "sleep") {
    log().info("rank {}: straggler: computes {}x slower for {} (sleeps {} x its compute time per step)",
               rank, factor, when, factor - 1);
    return std::make_shared<SleepingStraggler>(factor, window);
  }
  if (cpu_cgroup.empty()) {
    throw ConfigError(fmt::format(
        "network.stragglers: rank {} is a straggler in quota mode, which murmur-launch sets up (a CPU "
        "quota on each local peer's own cgroup), and this peer has no cgroup of its ($MURMUR_CPU_CGROUP "
        "unset): start the peers with tools/murmur-launch, or set network.straggler_mode: sleep", rank));
  }
  log().info("rank {}: straggler: 1/{} of its CPU share for {} (cgroup {})", rank, factor, when, cpu_cgroup);
  if (network.straggler_steps.empty()) return nullptr;  // murmur-launch set the quota for the whole run
  return std::make_shared<QuotaStraggler>(rank, factor, window, CpuQuota(cpu_cgroup));
}

}  // namespace murmur::runtime
