// SIGINT/SIGTERM handling for the training loop: the handler only sets a flag; the loop polls it
// at step boundaries, writes a checkpoint and returns, so a stop never tears a file.
#pragma once

#include <chrono>

namespace murmur::runtime {

// How long a peer whose neighbor vanished waits for a stop signal of its own before it calls the
// loss a failure: signals sent to every peer at once (Ctrl-C, the launcher over ssh) arrive well
// within it.
inline constexpr std::chrono::milliseconds kStopGrace{2000};

// Installs the handlers (idempotent). A second signal while stopping restores the default action.
void install_stop_handlers();
// True once SIGINT or SIGTERM arrived.
bool stop_requested();
// True once a stop was asked for, waiting up to `grace` for one. A peer whose neighbor vanished
// asks this: a Ctrl-C reaches every peer of a run within milliseconds of each other, but one that
// got it first may already have stopped, and closed its connections, before the others heard it.
bool stop_requested_within(std::chrono::milliseconds grace);
// The signal that asked to stop (0 if none), for the exit code 128 + signal.
int stop_signal();

}  // namespace murmur::runtime
