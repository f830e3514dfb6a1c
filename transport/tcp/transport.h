// The tcp backend: Boost.Asio sockets driven by one I/O thread per transport. Connections are
// opened lazily, to the ranks actually used, one per pair (the lower rank dials), and start with
// the authenticated handshake of transport/handshake.h. A send writes header and user bytes with
// one scatter-gather write per chunk (nothing copied); a recv posted before its message arrives
// is filled in place. Thread-compatible, like every Transport: one thread calls it; the I/O thread
// is internal and never calls user code.
#pragma once

#include <memory>
#include <string>

#include "core/config.h"
#include "transport/rendezvous.h"
#include "transport/transport.h"

namespace murmur::transport::tcp {

class Context;

class Transport final : public transport::Transport {
 public:
  // Listens on config.host:config.port (or this rank's entry of a static list), publishes the
  // address through `rendezvous` and starts the I/O thread. Throws TransportError if it cannot
  // listen, ConfigError if transport.secret_file cannot be read.
  Transport(const TransportConfig& config, int rank, int world_size,
            std::shared_ptr<Rendezvous> rendezvous);
  ~Transport() override;

  // "host:port" this rank listens on.
  std::string local_address() const;

  int rank() const override;
  int world_size() const override;
  std::string name() const override { return "tcp"; }
  std::unique_ptr<Region> register_region(std::span<std::byte> bytes) override;
  // The first send or recv to a rank starts connecting to it; errors (PeerLost naming the rank,
  // its address and what was awaited; AuthError; ProtocolError) surface from test/wait.
  Request send(int peer, Tag tag, const Region& from, ByteRange range) override;
  Request recv(int peer, Tag tag, Region& into, ByteRange range) override;
  bool test(Request& request) override;
  bool wait(Request& request, Deadline deadline) override;
  // A transfer under way ends at a frame boundary, the connection kept: a send partly written
  // sends an abort frame instead of its rest (the peer's recv waits on for another message), a
  // recv being filled discards the rest of its message. Waits for the frame on the wire for a
  // heartbeat interval (a fifth of transport.peer_timeout_ms, at most a second); a peer that
  // does not take it by then loses the connection (it sees PeerLost), as before.
  void cancel(Request& request) override;
  // Every connection carries a heartbeat frame when it has been idle for a fifth of
  // transport.peer_timeout_ms (at most a second), and every frame that arrives counts as heard.
  std::optional<Clock::duration> silent_for(int peer) const override;
  // Closes the connection to `peer` (its end sees PeerLost); it comes back only restarted. A
  // peer that came back restarted before its old process was dropped is not cut off: that drop
  // is the old process's, and a no-op.
  void drop(int peer) override;
  std::uint64_t bytes_sent() const override;
  std::uint64_t bytes_received() const override;

 private:
  std::unique_ptr<Context> context_;
};

}  // namespace murmur::transport::tcp
