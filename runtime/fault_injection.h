// Fault injection for tests and experiments: MURMUR_FAULT_KILL="rank:step[,rank:step...]" makes
// that rank SIGKILL itself right after it finishes that step (its averaging and any checkpoint of
// that step included). A real SIGKILL, as the OOM killer would send, but at a known step: a
// test that kills a peer "mid-run" from outside races a run that may already be over.
#pragma once

#include <cstdint>
#include <string_view>

namespace murmur::runtime {

// The step after which `rank` must die, from `spec` (the variable's value); 0 = never. Throws
// ConfigError naming the variable for a malformed spec.
std::int64_t fault_kill_step(std::string_view spec, int rank);

// The same from the environment (unset or empty: 0).
std::int64_t fault_kill_step_from_env(int rank);

// Logs why, then SIGKILLs this process. Does not return.
[[noreturn]] void kill_self(int rank, std::int64_t step);

}  // namespace murmur::runtime
