// SIGINT/SIGTERM handling for the training loop: the handler only sets a flag; the loop polls it
// at step boundaries, writes a checkpoint and returns, so a stop never tears a file.
#pragma once

namespace murmur::runtime {

// Installs the handlers (idempotent). A second signal while stopping restores the default action.
void install_stop_handlers();
// True once SIGINT or SIGTERM arrived.
bool stop_requested();
// The signal that asked to stop (0 if none), for the exit code 128 + signal.
int stop_signal();

}  // namespace murmur::runtime
