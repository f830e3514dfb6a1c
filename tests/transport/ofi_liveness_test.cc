// The liveness sockets of the ofi backend: a process that dies is reported (once), one that
// destroys its Liveness in order is not, and a port nobody listens on counts as dead.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <thread>

#include <catch2/catch.hpp>

#include "transport/ofi/liveness.h"

namespace murmur::transport::ofi {
namespace {

// Polls until something is reported or ~5 s pass (the sockets are on loopback).
std::vector<int> poll_for_a_while(Liveness& l) {
  for (int i = 0; i < 500; ++i) {
    auto lost = l.poll();
    if (!lost.empty()) return lost;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return {};
}

// A child that listens, sends its port through a pipe, waits for one byte, then ends: by
// _exit (a crash: no goodbye) or by destroying its Liveness first.
pid_t spawn_watched(bool orderly, int* port_out, int* go_fd) {
  int up[2], down[2];
  REQUIRE(::pipe(up) == 0);
  REQUIRE(::pipe(down) == 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    {
      Liveness l("127.0.0.1");
      std::uint16_t port = l.port();
      (void)!::write(up[1], &port, sizeof port);
      char c;
      // Accept the watcher before the go signal, as a running transport would.
      for (int i = 0; i < 100; ++i) {
        l.poll();
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      (void)!::read(down[0], &c, 1);
      if (!orderly) ::_exit(0);
    }
    ::_exit(0);
  }
  std::uint16_t port = 0;
  REQUIRE(::read(up[0], &port, sizeof port) == sizeof port);
  *port_out = port;
  *go_fd = down[1];
  ::close(up[0]);
  ::close(up[1]);
  ::close(down[0]);
  return pid;
}

TEST_CASE("ofi liveness: a dead process is reported once, an orderly one never", "[ofi]") {
  const bool orderly = GENERATE(false, true);
  CAPTURE(orderly);
  int port = 0, go = -1;
  pid_t pid = spawn_watched(orderly, &port, &go);
  Liveness me("127.0.0.1");
  me.set_address(3, "127.0.0.1", static_cast<std::uint16_t>(port));
  me.watch(3);
  me.watch(3);  // once is enough
  CHECK(me.poll().empty());
  (void)!::write(go, "x", 1);
  ::close(go);
  ::waitpid(pid, nullptr, 0);
  if (orderly) {
    CHECK(poll_for_a_while(me).empty());
  } else {
    CHECK(poll_for_a_while(me) == std::vector<int>{3});
    CHECK(me.poll().empty());  // reported once
  }
}

TEST_CASE("ofi liveness: a port nobody listens on is a dead peer", "[ofi]") {
  std::uint16_t closed_port = 0;
  { closed_port = Liveness("127.0.0.1").port(); }
  Liveness me("127.0.0.1");
  me.set_address(1, "127.0.0.1", closed_port);
  me.watch(1);
  CHECK(poll_for_a_while(me) == std::vector<int>{1});
}

}  // namespace
}  // namespace murmur::transport::ofi
