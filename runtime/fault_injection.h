// Fault injection for tests and experiments, at a known step: a test that acts on a peer "mid-run"
// from outside races a run that may already be over.
// - MURMUR_FAULT_KILL="rank:step[,rank:step...]" makes that rank SIGKILL itself right after it
//   finishes that step (its averaging and any checkpoint of that step included). A real SIGKILL,
//   as the OOM killer would send.
// - MURMUR_FAULT_STALL="rank:step:ms[,...]" makes that rank's training thread sleep `ms` after
//   that step: a slow step, a long pause, a swapped-out process. Its transport lives on (on tcp
//   it keeps sending heartbeats), so its neighbors must wait for it, not drop it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "runtime/step_hook.h"

namespace murmur::runtime {

// The step after which `rank` must die, from `spec` (the variable's value); 0 = never. Throws
// ConfigError naming the variable for a malformed spec.
std::int64_t fault_kill_step(std::string_view spec, int rank);

// Logs why, then SIGKILLs this process. Does not return.
[[noreturn]] void kill_self(int rank, std::int64_t step);

struct FaultStall {
  std::int64_t step = 0;  // 0 = never
  std::chrono::milliseconds pause{0};
};

// The stall of `rank`, from MURMUR_FAULT_STALL's value `spec`. Throws ConfigError naming the
// variable for a malformed spec.
FaultStall fault_stall(std::string_view spec, int rank);

// Logs it, then sleeps the stall's pause on the calling thread.
void stall_self(int rank, const FaultStall& stall);

// The hooks of `rank` that MURMUR_FAULT_KILL (`kill_spec`) and MURMUR_FAULT_STALL
// (`stall_spec`) ask for: none, one, or both. Throws ConfigError as the parsers do.
StepHooks fault_hooks(std::string_view kill_spec, std::string_view stall_spec, int rank);
// The same from the environment (murmur-peer's main calls this; nothing else reads it).
StepHooks fault_hooks_from_env(int rank);

}  // namespace murmur::runtime
