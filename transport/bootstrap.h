// Swaps small opaque blobs (UCX worker addresses, libfabric endpoint names, remote keys) between
// the ranks that talk to each other, over an authenticated TCP channel: never through a central
// process. Implemented by transport/tcp (TcpBootstrap); used by the ucx and ofi backends at setup,
// and for the rest of the run to meet a restarted rank again (answer).
// Thread-compatible: one thread uses a Bootstrap.
#pragma once

#include <cstddef>
#include <span>
#include <string>
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
  // exchange(), where a peer that is not there (dead, left the run, or not come by `deadline`)
  // does not fail the rest: its blob is empty, and `missed` (one entry per peer) says why; a met
  // peer's entry is empty. What the ucx and ofi backends start with, so that a peer restarted
  // beside a dead rank, or after the others finished, meets those still there. By default (a
  // bootstrap that cannot tell one peer's loss from another's), as exchange().
  virtual std::vector<std::vector<std::byte>> exchange_with_live(std::span<const int> peers,
                                                                 std::span<const std::byte> mine,
                                                                 Deadline deadline,
                                                                 std::vector<std::string>& missed) {
    missed.assign(peers.size(), std::string());
    return exchange(peers, mine, deadline);
  }

  // A rank restarted into a running run meets its peers again with its first exchange(); a
  // bootstrap that lives on after the setup lets those it met before answer it. Called now and
  // then on the driving thread, answer() takes the blob of every rank of `peers` that has begun
  // such an exchange since, sends `mine` back (as that exchange expects), and returns them.
  // Never blocks; a rank that dies mid-answer is simply not returned. By default (a bootstrap
  // that serves only the setup) nobody comes back.
  struct Met {
    int rank = -1;
    std::vector<std::byte> blob;
  };
  virtual std::vector<Met> answer(std::span<const int> peers, std::span<const std::byte> mine) {
    return {};
  }
};

}  // namespace murmur::transport
