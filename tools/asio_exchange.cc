// asio-exchange: two processes exchange N bytes each way over loopback TCP, 18 timed rounds,
// written three ways, to show what the tcp backend's Asio calls cost against a plain poll()
// loop (docs/benchmarks.md, "Where the tcp backend's time went"):
//   poll    one thread, non-blocking read()/write() of up to 1 MiB per call
//   asio    murmur's pattern before the fix: async_read/async_write of 48-byte headers and
//           1 MiB frames with asio's transfer_all (at most 64 KiB per system call)
//   uncap   the same with a completion condition that lets one call move the rest
// Usage: asio-exchange BYTES poll|asio|uncap   (prints the mean milliseconds per exchange)
#include <utility>  // Boost 1.74's awaitable.hpp uses std::exchange without including <utility>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kRounds = 18;
constexpr std::size_t kFrame = std::size_t{1} << 20;

struct Uncapped {
  std::size_t operator()(const boost::system::error_code& error, std::size_t) const {
    return error ? 0 : std::numeric_limits<std::size_t>::max();
  }
};

void check(bool ok, const char* what) {
  if (!ok) {
    std::perror(what);
    std::exit(1);
  }
}

// Both ends write a byte and read the other's: the round starts together.
void sync(int fd) {
  char c = 1;
  const int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  check(write(fd, &c, 1) == 1 && read(fd, &c, 1) == 1, "sync");
  fcntl(fd, F_SETFL, flags);
}

void poll_exchange(int fd, const char* out, char* in, std::size_t n) {
  std::size_t sent = 0, got = 0;
  while (sent < n || got < n) {
    pollfd p{fd, static_cast<short>((sent < n ? POLLOUT : 0) | (got < n ? POLLIN : 0)), 0};
    poll(&p, 1, -1);
    if (p.revents & POLLIN) {
      const ssize_t r = read(fd, in + got, std::min(kFrame, n - got));
      if (r > 0) got += static_cast<std::size_t>(r);
    }
    if (p.revents & POLLOUT) {
      const ssize_t w = write(fd, out + sent, std::min(kFrame, n - sent));
      if (w > 0) sent += static_cast<std::size_t>(w);
    }
  }
}

template <class Condition>
asio::awaitable<void> send_frames(asio::ip::tcp::socket& s, const char* out, std::size_t n) {
  for (std::size_t off = 0; off < n; off += kFrame) {
    std::array<char, 48> header{};
    std::array<asio::const_buffer, 2> b{asio::buffer(header),
                                        asio::buffer(out + off, std::min(kFrame, n - off))};
    co_await asio::async_write(s, b, Condition{}, asio::use_awaitable);
  }
}

template <class Condition>
asio::awaitable<void> recv_frames(asio::ip::tcp::socket& s, char* in, std::size_t n) {
  for (std::size_t off = 0; off < n; off += kFrame) {
    std::array<char, 48> header;
    co_await asio::async_read(s, asio::buffer(header), asio::use_awaitable);
    co_await asio::async_read(s, asio::buffer(in + off, std::min(kFrame, n - off)), Condition{},
                              asio::use_awaitable);
  }
}

template <class Condition>
double asio_rounds(int fd, const char* out, char* in, std::size_t n) {
  asio::io_context io;
  asio::ip::tcp::socket s(io, asio::ip::tcp::v4(), fd);
  double total = 0;
  for (int i = 0; i < kRounds + 2; ++i) {
    sync(fd);
    const auto t = Clock::now();
    asio::co_spawn(io, send_frames<Condition>(s, out, n), asio::detached);
    asio::co_spawn(io, recv_frames<Condition>(s, in, n), asio::detached);
    io.restart();
    io.run();
    if (i >= 2) total += std::chrono::duration<double>(Clock::now() - t).count();
  }
  s.release();
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 3 ? argv[2] : "";
  if (mode != "poll" && mode != "asio" && mode != "uncap") {
    std::fprintf(stderr, "usage: asio-exchange BYTES poll|asio|uncap\n");
    return 2;
  }
  const std::size_t n = std::strtoull(argv[1], nullptr, 10);
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  check(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && listen(listener, 1) == 0 &&
            getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) == 0,
        "listen");
  const pid_t child = fork();
  int fd;
  if (child == 0) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    check(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0, "connect");
  } else {
    fd = accept(listener, nullptr, nullptr);
    check(fd >= 0, "accept");
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::vector<char> out(n, 1), in(n);
  double total = 0;
  if (mode == "poll") {
    fcntl(fd, F_SETFL, O_NONBLOCK);
    for (int i = 0; i < kRounds + 2; ++i) {
      sync(fd);
      const auto t = Clock::now();
      poll_exchange(fd, out.data(), in.data(), n);
      if (i >= 2) total += std::chrono::duration<double>(Clock::now() - t).count();
    }
  } else if (mode == "asio") {
    total = asio_rounds<asio::detail::transfer_all_t>(fd, out.data(), in.data(), n);
  } else {
    total = asio_rounds<Uncapped>(fd, out.data(), in.data(), n);
  }
  if (child == 0) return 0;
  waitpid(child, nullptr, 0);
  std::printf("%s %zu bytes: %.3f ms per exchange\n", mode.c_str(), n, total / kRounds * 1e3);
  return 0;
}
