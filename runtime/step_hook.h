// StepHook: what the runtime calls around each local step for things that are not training:
// emulated stragglers (network.stragglers) and fault injection (tests, experiments). Hooks are
// built at the edge (murmur-peer's main from the environment, run_peer from the config) and
// handed to the peer; the training loop only calls them and never reads the environment.
// Called by the training thread only.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "core/config.h"

namespace murmur::runtime {

class StepHook {
 public:
  virtual ~StepHook() = default;
  // After local step `step`'s compute (forward, backward, update), which took `compute_s`; time
  // spent here counts as compute.
  virtual void after_compute(std::int64_t step, double compute_s) {}
  // After step `step` is complete: averaged, logged, evaluated and checkpointed.
  virtual void after_step(std::int64_t step) {}
};

using StepHooks = std::vector<std::shared_ptr<StepHook>>;

// network.stragglers for `rank`: a peer with factor f computes f times slower than it could, for
// the whole run or network.straggler_steps. In sleep mode it sleeps (f - 1) x its compute time
// after each such step. In quota mode murmur-launch made `cpu_cgroup` (the peer's own cgroup,
// $MURMUR_CPU_CGROUP) with 1/f of the peer's share of the cores, or its whole share when a window
// is set, which the hook then switches between steps. nullptr when there is nothing to do per
// step; throws ConfigError for a straggler in quota mode without a cgroup.
std::shared_ptr<StepHook> straggler_hook(const NetworkConfig& network, int rank,
                                         const std::filesystem::path& cpu_cgroup);

}  // namespace murmur::runtime
