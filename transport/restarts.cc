#include "transport/restarts.h"

#include <chrono>

#include <spdlog/spdlog.h>

#include "core/error.h"

namespace murmur::transport {

void Restarts::remember(std::span<const int> peers, std::span<const std::byte> mine) {
  peers_.assign(peers.begin(), peers.end());
  mine_.assign(mine.begin(), mine.end());
}

void Restarts::poll(const char* backend, int self,
                    const std::function<void(int, std::vector<std::byte>)>& revive) {
  if (!bootstrap_) return;
  const Clock::time_point now = Clock::now();
  if (now < next_) return;
  next_ = now + std::chrono::milliseconds(20);
  for (Bootstrap::Met& met : bootstrap_->answer(peers_, mine_)) {
    try {
      revive(met.rank, std::move(met.blob));
    } catch (const Error& e) {
      // A blob that is no address (cut short, refused by the library): that rank stays lost.
      spdlog::warn("{}: rank {}: could not take back restarted rank {}: {}", backend, self,
                   met.rank, e.what());
    }
  }
}

}  // namespace murmur::transport
