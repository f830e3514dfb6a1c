// Liveness: heartbeats and death notices for the backends whose own stack cannot tell a dead or
// frozen peer from a slow one (ucx, ofi). libfabric 1.17's tcp;ofi_rxm fails no posted receive
// when a connection drops, shm has no connection at all, and UCX notices a dead peer only on
// transports with error handling, and a frozen one (SIGSTOP) never.
//
// Each rank listens on one TCP port. A rank that talks to a peer connects to that peer's port
// once (watch) and keeps the socket open. A thread of its own writes one heartbeat byte to every
// watcher a fifth of the peer timeout apart (10 ms to 1 s, as tcp's heartbeat frames), and
// reads what the watched peers write:
// - a heartbeat: the peer is heard (silent_for restarts);
// - EOF or a socket error, or a refused connect: the process is gone without saying so, and is
//   reported lost (poll);
// - one goodbye byte (written by a Liveness destroyed in order): the peer left; not lost.
// A process that is frozen, or whose machine is cut off, sends nothing: silent_for grows, and
// the caller decides (membership drops it after transport.peer_timeout_ms). A live process whose
// training thread is slow keeps beating, since the beats come from this thread.
// A watcher's first 4 bytes name its rank, so that drop() can close both sockets between us and
// a rank we give up on: that rank then finds us lost at once too (as tcp's drop does), instead
// of waiting on a rank that no longer talks to it. The sockets carry nothing else (an intruder
// can only watch us, be watched, or have its socket closed by a drop), so no handshake.
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "transport/transport.h"

namespace murmur::transport {

class Liveness {
 public:
  // Listens on `host`, any free port, and starts beating; `self` is this rank. Throws
  // TransportError if it cannot.
  Liveness(const std::string& host, std::chrono::milliseconds peer_timeout, int self);
  // Says goodbye on every accepted connection, then closes every socket.
  ~Liveness();
  Liveness(const Liveness&) = delete;
  Liveness& operator=(const Liveness&) = delete;

  std::uint16_t port() const { return port_; }
  // How far apart the heartbeats are for `peer_timeout`.
  static Clock::duration beat_interval(std::chrono::milliseconds peer_timeout);

  // `name` (a backend's address blob) with what a peer needs to watch us in front: u16 port,
  // u16 host length, host (little-endian, as every host here is).
  std::vector<std::byte> prefixed(std::span<const std::byte> name, const std::string& host) const;
  // Takes that prefix off `blob`, rank's address as its bootstrap delivered it, and records where
  // the rank listens. Throws ProtocolError naming the rank if the blob is cut short.
  void take_address(int rank, std::vector<std::byte>& blob, const char* backend);
  // Where `rank` listens, as it published it.
  void set_address(int rank, std::string host, std::uint16_t port);
  // Starts watching `rank` (a non-blocking connect); does nothing if already watched.
  void watch(int rank);
  // The ranks found dead (EOF or a socket error without a goodbye; a refused connect) at least
  // kLostGrace ago and not reported yet, each once: what a peer sent just before it died may
  // still be in the backend's queues, and should be delivered rather than reported lost.
  std::vector<int> poll();
  static constexpr std::chrono::milliseconds kLostGrace{50};
  // Forgets the watch of `rank` (and a loss found but not yet polled), for a rank that was
  // restarted: take_address() and watch() then watch the new process.
  void renew(int rank);
  // Closes both sockets between us and `rank` (watched, and its watch of us), without reporting
  // it lost: it learns that we gave up on it, as from a death.
  void drop(int rank);
  // How long a watched `rank` has sent no heartbeat (since watch() if none yet); nullopt if it
  // is not watched.
  std::optional<Clock::duration> silent_for(int rank) const;

 private:
  struct Watched {
    int fd = -1;
    bool connected = false;
    bool gone = false;                // said goodbye, or was reported lost
    Clock::time_point heard{};        // the last heartbeat (or the watch)
  };
  struct Watcher {
    int fd = -1;
    int rank = -1;  // once its 4 bytes are in
    unsigned char rank_bytes[4] = {};
    int got = 0;
  };
  struct Address {
    std::string host;
    std::uint16_t port = 0;
  };

  void run();
  void beat();
  void read_watched(int rank, Watched& w, short revents, Clock::time_point now);
  // Reads a watcher's socket; false once it is to be closed (EOF, an error, bytes past its rank).
  static bool read_watcher(Watcher& w);
  void apply_drops();
  void wake();

  const Clock::duration interval_;
  const int self_;
  int listener_ = -1;
  int wake_fd_ = -1;
  std::uint16_t port_ = 0;
  std::vector<Watcher> accepted_;  // only the thread (then the destructor) uses them
  mutable std::mutex mu_;      // guards every member below (leaf)
  bool stop_ = false;
  std::unordered_map<int, Address> addresses_;
  std::unordered_map<int, Watched> watched_;  // by rank
  std::vector<std::pair<int, Clock::time_point>> lost_;  // found dead (when), for poll()
  std::vector<int> drops_;                     // drop() requests, for the thread
  std::vector<int> retired_;                   // renewed watches' sockets, for the thread to close
  std::thread thread_;                         // last: starts after everything above exists
};

}  // namespace murmur::transport
