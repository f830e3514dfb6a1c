// Restarts: what the ucx and ofi transports keep to take a restarted rank back. It holds the
// bootstrap they met their peers over (transport/bootstrap.h, kept for the run), whom they met
// and what they sent them, and, from the driving thread's progress, asks that bootstrap at most
// every 20 ms whether a restarted rank has met us again; each one goes to the transport's revive.
// Thread-compatible.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "transport/bootstrap.h"
#include "transport/transport.h"

namespace murmur::transport {

class Restarts {
 public:
  // What the transport sent `peers` at setup: a restarted rank gets the same back.
  void remember(std::span<const int> peers, std::span<const std::byte> mine);
  // The bootstrap of the setup, kept; without one, poll() does nothing.
  void keep(std::unique_ptr<Bootstrap> bootstrap) { bootstrap_ = std::move(bootstrap); }
  // Calls revive(rank, blob) for each rank met again since the last call (at most every 20 ms).
  // A revive that throws murmur::Error is logged (`backend`: "ucx", "ofi"; `self`: our rank)
  // and that rank stays lost.
  void poll(const char* backend, int self,
            const std::function<void(int, std::vector<std::byte>)>& revive);

 private:
  std::unique_ptr<Bootstrap> bootstrap_;
  std::vector<int> peers_;
  std::vector<std::byte> mine_;
  Clock::time_point next_{};
};

}  // namespace murmur::transport
