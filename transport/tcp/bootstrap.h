// TcpBootstrap: the Bootstrap (transport/bootstrap.h) of the ucx and ofi backends, carried by a
// tcp::Transport of its own. It listens and publishes its address under the file prefix
// "bootstrap-" of the rendezvous directory (or on this rank's entry of a static list), connects
// only to the ranks passed to exchange(), and so inherits the authenticated handshake, the frame
// checks and the timeouts of the tcp backend. Thread-compatible.
#pragma once

#include <memory>

#include "core/config.h"
#include "transport/bootstrap.h"
#include "transport/rendezvous.h"
#include "transport/tcp/transport.h"

namespace murmur::transport {

class TcpBootstrap final : public Bootstrap {
 public:
  // Builds the rendezvous from `config` (make_rendezvous with prefix "bootstrap-").
  TcpBootstrap(const TransportConfig& config, int rank, int world_size);
  TcpBootstrap(const TransportConfig& config, int rank, int world_size,
               std::shared_ptr<Rendezvous> rendezvous);

  int rank() const override { return transport_.rank(); }
  int world_size() const override { return transport_.world_size(); }
  // Throws PeerLost naming the rank and its address if a peer is not there by `deadline`,
  // AuthError if it does not hold the secret, ProtocolError if its blob is over 64 MiB.
  std::vector<std::vector<std::byte>> exchange(std::span<const int> peers,
                                               std::span<const std::byte> mine,
                                               Deadline deadline) override;

 private:
  tcp::Transport transport_;
  Tag round_ = 0;  // each exchange() uses fresh tags, so rounds never mix
};

}  // namespace murmur::transport
