#include "transport/transport.h"

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
  for (;;) {
    if (test(request)) return true;
    if (Clock::now() >= deadline) return false;
  }
}

bool wait_all(Transport& transport, std::span<Request> requests, Deadline deadline) {
  for (Request& r : requests) {
    if (r.valid() && !transport.wait(r, deadline)) return false;
  }
  return true;
}

}  // namespace murmur::transport
