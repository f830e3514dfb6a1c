// Swaps small opaque blobs (UCX worker addresses, libfabric endpoint names, remote keys) between
// the ranks that talk to each other, over an authenticated TCP channel: never through a central
// process. Implemented by transport/tcp (TcpBootstrap); used by the ucx and ofi backends at setup.
// Thread-compatible: one thread uses a Bootstrap.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "transport/transport.h"

namespace murmur::transport {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Sends `mine` to every rank in `peers` and returns each one's blob, in the order of `peers`.
  // Throws PeerLost (naming the rank and the address awaited) if a peer is not there by `deadline`.
  virtual std::vector<std::vector<std::byte>> exchange(std::span<const int> peers,
                                                       std::span<const std::byte> mine,
                                                       Deadline deadline) = 0;
};

}  // namespace murmur::transport
