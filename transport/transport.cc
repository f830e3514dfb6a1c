#include "transport/transport.h"

#include <algorithm>
#include <thread>

#include "core/error.h"

namespace murmur::transport {

Request Transport::put(int peer, const Region&, ByteRange, std::span<const std::byte>,
                       std::size_t) {
  throw TransportError(name() + ": put to rank " + std::to_string(peer) +
                       ": this backend has no one-sided put");
}

std::unique_ptr<Region> Transport::register_device_region(std::span<std::byte> bytes) {
  throw TransportError(name() + ": cannot register " + std::to_string(bytes.size()) +
                       " bytes of device memory: this backend moves host memory only");
}

bool Transport::wait(Request& request, Deadline deadline) {
  // Polls, and after 50 us gives the core away between passes (as ofi's wait does, and Open
  // MPI's when oversubscribed): 4 ucx peers on 2 cores, each spinning, starved
  // the ones with data to move; the 1 MiB exchange took 40 times as long as at 2 peers.
  const Clock::time_point spin_until = Clock::now() + std::chrono::microseconds(50);
  for (;;) {
    if (test(request)) return true;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) return false;
    if (now >= spin_until) std::this_thread::yield();
  }
}

bool wait_all(Transport& transport, std::span<Request> requests, Deadline deadline) {
  for (Request& r : requests) {
    if (r.valid() && !transport.wait(r, deadline)) return false;
  }
  return true;
}

WaitEnd wait_heard(Transport& transport, Request& request, std::chrono::milliseconds silence,
                   std::chrono::milliseconds timeout) {
  const auto start = Clock::now();
  const Deadline end = start + timeout;
  // A silence is noticed within a tenth of itself (and within 100 ms).
  const Clock::duration slice = std::clamp<Clock::duration>(
      silence / 10, std::chrono::milliseconds(1), std::chrono::milliseconds(100));
  for (;;) {
    if (transport.wait(request, std::min(end, Clock::now() + slice))) return WaitEnd::kDone;
    const auto now = Clock::now();
    // Counted from the call at most: a connection this wait has only just started may not have
    // been heard yet.
    const auto quiet = transport.silent_for(request.state()->peer);
    const Clock::duration silent = quiet ? std::min(*quiet, now - start) : now - start;
    if (silent >= silence) return WaitEnd::kSilent;
    if (now >= end) return WaitEnd::kTimedOut;
  }
}

}  // namespace murmur::transport
