// TcpBootstrap: the Bootstrap (transport/bootstrap.h) of the ucx and ofi backends, carried by a
// tcp::Transport of its own. It listens and publishes its address under the file prefix
// "bootstrap-" of the rendezvous directory (or on this rank's entry of a static list), connects
// only to the ranks passed to exchange(), and so inherits the authenticated handshake, the frame
// checks and the timeouts of the tcp backend. Kept by the ucx and ofi transports for the whole
// run, so that a restarted rank finds it listening (answer). Thread-compatible.
#pragma once

#include <array>
#include <map>
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
  // Names, for each peer it missed, the loss (a refused connection, "has left the run") or the
  // deadline.
  std::vector<std::vector<std::byte>> exchange_with_live(std::span<const int> peers,
                                                         std::span<const std::byte> mine,
                                                         Deadline deadline,
                                                         std::vector<std::string>& missed) override;
  // Keeps a receive posted, per rank of `peers`, for the first message of a restarted rank's
  // first exchange (tag 0: tcp takes a restarted rank back on a fresh connection, and the old
  // one's tag 0 was taken at setup). A blob over 64 MiB is refused with a warning.
  std::vector<Met> answer(std::span<const int> peers, std::span<const std::byte> mine) override;

 private:
  // One rank's answer in the making: its size, then its blob, then our reply on their way.
  struct Answering {
    std::array<std::byte, 8> size{};
    std::unique_ptr<Region> size_in;
    Request size_recv;
    std::vector<std::byte> blob;
    std::unique_ptr<Region> blob_in;
    Request blob_recv;
    std::array<std::byte, 8> reply_size{};
    std::vector<std::byte> reply;
    std::vector<std::unique_ptr<Region>> reply_out;
    std::vector<Request> sends;
    Clock::time_point next_post{};  // after a failed receive (the rank is still dead)
  };

  // Both exchanges: with `missed`, a peer's loss goes there instead of out as an exception.
  std::vector<std::vector<std::byte>> swap(std::span<const int> peers,
                                           std::span<const std::byte> mine, Deadline deadline,
                                           std::vector<std::string>* missed);

  // Before transport_, which goes first: its I/O thread may write into these until it stops.
  std::map<int, Answering> answering_;
  Tag round_ = 0;  // each exchange() uses fresh tags, so rounds never mix
  tcp::Transport transport_;
};

}  // namespace murmur::transport
