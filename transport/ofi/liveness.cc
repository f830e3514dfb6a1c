#include "transport/ofi/liveness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"

namespace murmur::transport::ofi {
namespace {

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
    throw TransportError(fmt::format("ofi: liveness: cannot resolve {}: {}", host,
                                     ::gai_strerror(rc)));
  }
  return found;
}

}  // namespace

Liveness::Liveness(const std::string& host) {
  addrinfo* ai = resolve(host, 0);
  listener_ = ::socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int rc = listener_ < 0 ? -1 : ::bind(listener_, ai->ai_addr, ai->ai_addrlen);
  ::freeaddrinfo(ai);
  if (rc != 0 || ::listen(listener_, 128) != 0) {
    const int err = errno;
    if (listener_ >= 0) ::close(listener_);
    throw TransportError(fmt::format("ofi: liveness: cannot listen on {}: {}", host,
                                     std::strerror(err)));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(listener_, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = ntohs(bound.ss_family == AF_INET6
                    ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                    : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

Liveness::~Liveness() {
  (void)poll();  // accept late watchers too, so that they get their goodbye
  for (int fd : accepted_) {
    (void)::send(fd, &kGoodbye, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    ::close(fd);
  }
  for (auto& [rank, w] : watched_) {
    if (w.fd >= 0) ::close(w.fd);
  }
  if (listener_ >= 0) ::close(listener_);
}

void Liveness::set_address(int rank, std::string host, std::uint16_t port) {
  addresses_[rank] = Address{std::move(host), port};
}

void Liveness::watch(int rank) {
  if (watched_.count(rank) != 0) return;
  Watched& w = watched_[rank];
  auto address = addresses_.find(rank);
  if (address == addresses_.end()) return;  // nothing published: cannot be watched
  addrinfo* ai = resolve(address->second.host, address->second.port);
  w.fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int rc = w.fd < 0 ? -1 : ::connect(w.fd, ai->ai_addr, ai->ai_addrlen);
  ::freeaddrinfo(ai);
  if (rc == 0) {
    w.connected = true;
  } else if (errno != EINPROGRESS) {
    // Refused: nobody listens where the rank published its port any more.
    if (w.fd >= 0) ::close(w.fd);
    w.fd = -1;
    lost_.push_back(rank);
  }
}

std::vector<int> Liveness::poll() {
  for (;;) {
    int fd = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) break;
    accepted_.push_back(fd);
  }
  std::vector<int> lost;
  lost.swap(lost_);
  std::vector<pollfd> fds;
  std::vector<int> ranks;
  for (auto& [rank, w] : watched_) {
    if (w.fd < 0) continue;
    fds.push_back({w.fd, static_cast<short>(w.connected ? POLLIN : POLLOUT), 0});
    ranks.push_back(rank);
  }
  if (fds.empty() || ::poll(fds.data(), fds.size(), 0) <= 0) return lost;
  for (std::size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    Watched& w = watched_[ranks[i]];
    bool dead = false, gone = false;
    if (!w.connected) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(w.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err == 0) {
        w.connected = true;
      } else {
        dead = true;
      }
    } else {
      char byte = 0;
      ssize_t n = ::recv(w.fd, &byte, 1, MSG_DONTWAIT);
      if (n == 1 && byte == kGoodbye) {
        gone = true;  // left in order: what it sent is on its way, nothing to report
      } else if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
        dead = true;
      }
    }
    if (dead || gone) {
      ::close(w.fd);
      w.fd = -1;
    }
    if (dead) lost.push_back(ranks[i]);
  }
  return lost;
}

}  // namespace murmur::transport::ofi
