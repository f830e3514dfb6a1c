// The harness of the api tests: a run of N peers, each a forked process that makes a
// murmur::Communicator from a config of the test's (on loopback, with a fresh rendezvous
// directory) and runs the test's body with it, as a program linking libmurmur would. A peer
// reports failure by throwing (MURMUR_CHECK throws with file and line); every run is bounded.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "api/murmur/murmur.h"

namespace murmur::testing {

struct PeersOptions {
  std::string backend = "tcp";  // a transport.backend, or "ofi:<provider>"
  std::chrono::seconds timeout{60};  // the whole run (x kTimeScale); stragglers are killed
  std::vector<std::string> environment;  // NAME=VALUE for every peer (MURMUR_SET, ...)
};

// Each peer's error ("" where its body returned), by rank. `yaml` is the config; the harness
// adds the world, the backend, loopback and the rendezvous; the run directory is `out`.
std::vector<std::string> run_peers(int n, const std::string& yaml, const std::filesystem::path& out,
                                   const std::function<void(Communicator&)>& body,
                                   const PeersOptions& options = {});

// "" if every peer returned, else a line per peer that did not.
std::string failed(const std::vector<std::string>& errors);

}  // namespace murmur::testing
