// Tells a crashed peer from a slow one, which libfabric 1.17 cannot: tcp;ofi_rxm fails no posted
// receive when a connection drops, and shm has no connection at all. Each rank listens on one
// TCP port; a rank that talks to a peer connects to that peer's port once and keeps the socket
// open. A process that dies has its sockets closed by the kernel (EOF); a Liveness destroyed in
// order first writes one goodbye byte, so a peer that left in order is not reported as lost.
// The sockets carry no data (an intruder can only watch us, or be watched), so no handshake.
// Owned by one ofi::Transport; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace murmur::transport::ofi {

class Liveness {
 public:
  // Listens on `host`, any free port. Throws TransportError if it cannot.
  explicit Liveness(const std::string& host);
  // Says goodbye on every accepted connection, then closes every socket.
  ~Liveness();
  Liveness(const Liveness&) = delete;
  Liveness& operator=(const Liveness&) = delete;

  std::uint16_t port() const { return port_; }
  // Where `rank` listens, as it published it.
  void set_address(int rank, std::string host, std::uint16_t port);
  // Starts watching `rank` (a non-blocking connect); does nothing if already watched.
  void watch(int rank);
  // Accepts new watchers and reads the watched sockets. Returns the ranks found dead (EOF or a
  // socket error without a goodbye; a refused connect) since the last call, each once.
  std::vector<int> poll();

 private:
  struct Watched {
    int fd = -1;
    bool connected = false;
  };
  struct Address {
    std::string host;
    std::uint16_t port = 0;
  };

  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::vector<int> accepted_;
  std::unordered_map<int, Address> addresses_;
  std::unordered_map<int, Watched> watched_;  // by rank; removed once lost or said goodbye
  std::vector<int> lost_;                      // found by watch(), reported by the next poll()
};

}  // namespace murmur::transport::ofi
