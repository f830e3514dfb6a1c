#include "transport/liveness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"

namespace murmur::transport {
namespace {

constexpr char kHeartbeat = 'H';
constexpr char kGoodbye = 'B';

// Resolves host:port for a stream socket; the first address wins, as the bootstrap's does.
addrinfo* resolve(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) {
    throw TransportError(fmt::format("liveness: cannot resolve {}: {}", host, ::gai_strerror(rc)));
  }
  return found;
}

}  // namespace

Clock::duration Liveness::beat_interval(std::chrono::milliseconds peer_timeout) {
  // As tcp's heartbeat frames: five per peer timeout, so that one late beat is not a silence.
  return std::clamp<Clock::duration>(peer_timeout / 5, std::chrono::milliseconds(10),
                                     std::chrono::seconds(1));
}

Liveness::Liveness(const std::string& host, std::chrono::milliseconds peer_timeout, int self)
    : interval_(beat_interval(peer_timeout)), self_(self) {
  addrinfo* ai = resolve(host, 0);
  listener_ = ::socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int rc = listener_ < 0 ? -1 : ::bind(listener_, ai->ai_addr, ai->ai_addrlen);
  ::freeaddrinfo(ai);
  if (rc != 0 || ::listen(listener_, 128) != 0) {
    const int err = errno;
    if (listener_ >= 0) ::close(listener_);
    throw TransportError(fmt::format("liveness: cannot listen on {}: {}", host, std::strerror(err)));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(listener_, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    const int err = errno;
    ::close(listener_);
    throw TransportError(fmt::format("liveness: eventfd: {}", std::strerror(err)));
  }
  thread_ = std::thread([this] { run(); });
}

Liveness::~Liveness() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake();
  thread_.join();
  // Accept late watchers too, so that they get their goodbye.
  for (;;) {
    int fd = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) break;
    accepted_.push_back(Watcher{fd});
  }
  for (const Watcher& w : accepted_) {
    (void)::send(w.fd, &kGoodbye, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    ::close(w.fd);
  }
  for (auto& [rank, w] : watched_) {
    if (w.fd >= 0) ::close(w.fd);
  }
  for (int fd : retired_) ::close(fd);
  ::close(listener_);
  ::close(wake_fd_);
}

void Liveness::wake() {
  const std::uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

std::vector<std::byte> Liveness::prefixed(std::span<const std::byte> name,
                                          const std::string& host) const {
  std::vector<std::byte> blob(4 + host.size());
  const std::uint16_t words[2] = {port_, static_cast<std::uint16_t>(host.size())};
  std::memcpy(blob.data(), words, 4);
  std::memcpy(blob.data() + 4, host.data(), host.size());
  blob.insert(blob.end(), name.begin(), name.end());
  return blob;
}

void Liveness::take_address(int rank, std::vector<std::byte>& blob, const char* backend) {
  std::uint16_t w[2] = {0, 0};
  if (blob.size() >= 4) std::memcpy(w, blob.data(), 4);
  if (blob.size() < 4u + w[1]) {
    throw ProtocolError(fmt::format("{}: rank {}'s address of {} bytes is cut short", backend, rank,
                                    blob.size()));
  }
  set_address(rank, std::string(reinterpret_cast<const char*>(blob.data()) + 4, w[1]), w[0]);
  blob.erase(blob.begin(), blob.begin() + 4 + w[1]);
}

void Liveness::set_address(int rank, std::string host, std::uint16_t port) {
  std::lock_guard lock(mu_);
  addresses_[rank] = Address{std::move(host), port};
}

void Liveness::watch(int rank) {
  std::unique_lock lock(mu_);
  if (watched_.count(rank) != 0) return;
  auto address = addresses_.find(rank);
  if (address == addresses_.end()) return;  // nothing published: cannot be watched
  const Address where = address->second;
  Watched& w = watched_[rank];
  w.heard = Clock::now();
  addrinfo* ai = resolve(where.host, where.port);
  w.fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int rc = w.fd < 0 ? -1 : ::connect(w.fd, ai->ai_addr, ai->ai_addrlen);
  ::freeaddrinfo(ai);
  if (rc == 0) {
    w.connected = true;
    const std::int32_t me = self_;
    (void)::send(w.fd, &me, sizeof me, MSG_NOSIGNAL | MSG_DONTWAIT);
  } else if (errno != EINPROGRESS) {
    // Refused: nobody listens where the rank published its port any more.
    if (w.fd >= 0) ::close(w.fd);
    w.fd = -1;
    w.gone = true;
    lost_.emplace_back(rank, Clock::now());
  }
  lock.unlock();
  wake();  // the thread polls the new socket from its next round on
}

std::vector<int> Liveness::poll() {
  const Clock::time_point due = Clock::now() - kLostGrace;
  std::vector<int> lost;
  std::lock_guard lock(mu_);
  std::erase_if(lost_, [&](const auto& found) {
    if (found.second > due) return false;
    lost.push_back(found.first);
    return true;
  });
  return lost;
}

void Liveness::drop(int rank) {
  {
    std::lock_guard lock(mu_);
    drops_.push_back(rank);
  }
  wake();
}

void Liveness::renew(int rank) {
  {
    std::lock_guard lock(mu_);
    auto it = watched_.find(rank);
    if (it != watched_.end()) {
      // The thread may be polling it: it closes it, so that the number is not reused meanwhile.
      if (it->second.fd >= 0) retired_.push_back(it->second.fd);
      watched_.erase(it);
    }
    std::erase_if(lost_, [&](const auto& found) { return found.first == rank; });
  }
  wake();
}

void Liveness::apply_drops() {
  std::vector<int> drops;
  {
    std::lock_guard lock(mu_);
    for (int fd : retired_) ::close(fd);
    retired_.clear();
    drops.swap(drops_);
    for (int r : drops) {
      auto it = watched_.find(r);
      if (it == watched_.end() || it->second.fd < 0) continue;
      ::close(it->second.fd);
      it->second.fd = -1;
      it->second.gone = true;
    }
  }
  std::erase_if(accepted_, [&](const Watcher& w) {
    if (w.rank < 0 || std::find(drops.begin(), drops.end(), w.rank) == drops.end()) return false;
    ::close(w.fd);
    return true;
  });
}

bool Liveness::read_watcher(Watcher& w) {
  unsigned char bytes[8];
  for (;;) {
    ssize_t n = ::recv(w.fd, bytes, sizeof bytes, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || w.got + n > 4) return false;  // closed, failed, or more than a rank
    std::memcpy(w.rank_bytes + w.got, bytes, static_cast<std::size_t>(n));
    w.got += static_cast<int>(n);
    if (w.got == 4) {
      std::int32_t r = 0;
      std::memcpy(&r, w.rank_bytes, 4);
      w.rank = r;
    }
  }
}

std::optional<Clock::duration> Liveness::silent_for(int rank) const {
  std::lock_guard lock(mu_);
  auto it = watched_.find(rank);
  if (it == watched_.end()) return std::nullopt;
  return Clock::now() - it->second.heard;
}

void Liveness::beat() {
  // Only this thread adds to, writes to or closes accepted_ (the destructor runs after it).
  for (auto it = accepted_.begin(); it != accepted_.end();) {
    ssize_t n = ::send(it->fd, &kHeartbeat, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      ::close(it->fd);  // the watcher went away
      it = accepted_.erase(it);
    } else {
      ++it;  // a full buffer: the watcher is frozen, and hears our silence
    }
  }
}

void Liveness::read_watched(int rank, Watched& w, short revents, Clock::time_point now) {
  bool dead = false;
  if (!w.connected) {
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(w.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err == 0) {
      w.connected = true;
      const std::int32_t me = self_;
      (void)::send(w.fd, &me, sizeof me, MSG_NOSIGNAL | MSG_DONTWAIT);
    } else {
      dead = true;
    }
  } else if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
    char bytes[64];
    for (;;) {
      ssize_t n = ::recv(w.fd, bytes, sizeof bytes, MSG_DONTWAIT);
      if (n > 0) {
        if (std::find(bytes, bytes + n, kGoodbye) != bytes + n) {
          w.gone = true;  // left in order: what it sent is on its way, nothing to report
          break;
        }
        w.heard = now;
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0 && errno == EINTR) continue;
      dead = true;  // EOF or an error, without a goodbye
      break;
    }
  }
  if (dead) {
    w.gone = true;
    lost_.emplace_back(rank, now);
  }
  if (w.gone) {
    ::close(w.fd);
    w.fd = -1;
  }
}

void Liveness::run() {
  Clock::time_point next_beat = Clock::now();
  std::vector<pollfd> fds;
  std::vector<int> ranks;  // per watched entry of fds, after the listener and accepted sockets
  for (;;) {
    const Clock::time_point now = Clock::now();
    if (now >= next_beat) {
      beat();
      next_beat = now + interval_;
    }
    fds.clear();
    ranks.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({listener_, POLLIN, 0});
    for (const Watcher& w : accepted_) fds.push_back({w.fd, POLLIN, 0});
    const std::size_t first_watched = fds.size();
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
      for (auto& [rank, w] : watched_) {
        if (w.fd < 0) continue;
        fds.push_back({w.fd, static_cast<short>(w.connected ? POLLIN : POLLOUT), 0});
        ranks.push_back(rank);
      }
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_beat - now);
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(wait.count()) + 1);
    if (n <= 0) continue;
    if (fds[0].revents != 0) {
      std::uint64_t count = 0;
      (void)!::read(wake_fd_, &count, sizeof count);
      apply_drops();  // closes sockets: the rest of this round's fds may be stale
      continue;
    }
    if (fds[1].revents != 0) {
      for (;;) {
        int fd = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        accepted_.push_back(Watcher{fd});
        (void)::send(fd, &kHeartbeat, 1, MSG_NOSIGNAL | MSG_DONTWAIT);  // heard from the start
      }
    }
    // A watcher sends its rank and then nothing: readable later means it closed its end.
    std::vector<int> closed;
    for (std::size_t i = 2; i < first_watched; ++i) {
      if (fds[i].revents != 0 && !read_watcher(accepted_[i - 2])) closed.push_back(fds[i].fd);
    }
    std::erase_if(accepted_, [&](const Watcher& w) {
      if (std::find(closed.begin(), closed.end(), w.fd) == closed.end()) return false;
      ::close(w.fd);
      return true;
    });
    const Clock::time_point after = Clock::now();
    std::lock_guard lock(mu_);
    for (std::size_t i = first_watched; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      // Renewed or dropped since this round's poll began: the fd is not this entry's.
      auto it = watched_.find(ranks[i - first_watched]);
      if (it == watched_.end() || it->second.fd != fds[i].fd) continue;
      read_watched(ranks[i - first_watched], it->second, fds[i].revents, after);
    }
  }
}

}  // namespace murmur::transport
