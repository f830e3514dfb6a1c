// Fault injection for tests and experiments, at a known step: a test that acts on a peer "mid-run"
// from outside races a run that may already be over.
// - MURMUR_FAULT_KILL="rank:step[:us][,...]" makes that rank SIGKILL itself right after it
//   finishes that step (its averaging and any checkpoint of that step included), or `us`
//   microseconds later from a timer thread, wherever the peer then is: inside the next step's
//   exchange, an allreduce, the final average. A real SIGKILL, as the OOM killer would send.
// - MURMUR_FAULT_STALL="rank:step:ms[,...]" makes that rank's training thread sleep `ms` after
//   that step: a slow step, a long pause, a swapped-out process. Its transport lives on (on tcp
//   it keeps sending heartbeats), so its neighbors must wait for it, not drop it.
// - MURMUR_FAULT_FREEZE="rank:step:ms[,...]" makes that rank SIGSTOP its whole process after that
//   step, transport and heartbeats included, and a child it forked first SIGCONTs it `ms` later:
//   a frozen or swapped-out process, as `kill -STOP` from outside would, at a known step.
// - MURMUR_FAULT_STEP_MS="ms": every step of the peer takes at least `ms` (its training thread
//   sleeps what its compute left of them): a pace that does not depend on the machine's load, for
//   tests whose timing is counted in steps (a rejoin's join step lies the peers' fastest pace
//   times a peer timeout ahead, and must fall inside the run).
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "runtime/step_hook.h"

namespace murmur::runtime {

struct FaultKill {
  std::int64_t step = 0;  // 0 = never
  std::chrono::microseconds delay{0};
};

// When `rank` must die, from `spec` (the variable's value). Throws ConfigError naming the
// variable for a malformed spec.
FaultKill fault_kill(std::string_view spec, int rank);

// Logs why, then SIGKILLs this process. Does not return.
[[noreturn]] void kill_self(int rank, const FaultKill& kill);

struct FaultStall {
  std::int64_t step = 0;  // 0 = never
  std::chrono::milliseconds pause{0};
};

// The stall of `rank`, from MURMUR_FAULT_STALL's value `spec`. Throws ConfigError naming the
// variable for a malformed spec.
FaultStall fault_stall(std::string_view spec, int rank);

// Logs it, then sleeps the stall's pause on the calling thread.
void stall_self(int rank, const FaultStall& stall);

// The freeze of `rank`, from MURMUR_FAULT_FREEZE's value `spec` (the same form as a stall).
FaultStall fault_freeze(std::string_view spec, int rank);

// Logs it, then stops this process with SIGSTOP; a forked child continues it after the pause.
void freeze_self(int rank, const FaultStall& freeze);

// The hooks of `rank` that MURMUR_FAULT_KILL (`kill_spec`), MURMUR_FAULT_STALL (`stall_spec`)
// and MURMUR_FAULT_FREEZE (`freeze_spec`) ask for. Throws ConfigError as the parsers do.
StepHooks fault_hooks(std::string_view kill_spec, std::string_view stall_spec,
                      std::string_view freeze_spec, int rank);
// The floor on each step's time that MURMUR_FAULT_STEP_MS (`spec`) asks for; nullptr for "".
// Throws ConfigError naming the variable for anything but a whole number of 1 to 60000 ms.
std::shared_ptr<StepHook> fault_step_floor(std::string_view spec);
// The same from the environment (murmur-peer's main calls this; nothing else reads it).
StepHooks fault_hooks_from_env(int rank);

}  // namespace murmur::runtime
