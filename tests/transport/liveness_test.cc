// The liveness sockets of the ucx and ofi backends (transport/liveness.h): a process that dies is
// reported (once), one that destroys its Liveness in order is not, a port nobody listens on
// counts as dead, and heartbeats tell a live process from a frozen one (SIGSTOP).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <thread>

#include <catch2/catch.hpp>

#include "tests/time_scale.h"
#include "transport/liveness.h"

namespace murmur::transport {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kPeerTimeout{500};  // beats every 100 ms

// Polls until something is reported or ~5 s pass (the sockets are on loopback).
std::vector<int> poll_for_a_while(Liveness& l) {
  for (int i = 0; i < 500; ++i) {
    auto lost = l.poll();
    if (!lost.empty()) return lost;
    std::this_thread::sleep_for(milliseconds(10));
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
      Liveness l("127.0.0.1", kPeerTimeout, 3);
      std::uint16_t port = l.port();
      (void)!::write(up[1], &port, sizeof port);
      char c;
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

milliseconds silent_ms(const Liveness& l, int rank) {
  auto quiet = l.silent_for(rank);
  REQUIRE(quiet.has_value());
  return std::chrono::duration_cast<milliseconds>(*quiet);
}

TEST_CASE("liveness: a dead process is reported once, an orderly one never", "[transport]") {
  const bool orderly = GENERATE(false, true);
  CAPTURE(orderly);
  int port = 0, go = -1;
  pid_t pid = spawn_watched(orderly, &port, &go);
  Liveness me("127.0.0.1", kPeerTimeout, 0);
  me.set_address(3, "127.0.0.1", static_cast<std::uint16_t>(port));
  CHECK_FALSE(me.silent_for(3).has_value());  // not watched yet
  me.watch(3);
  me.watch(3);  // once is enough
  std::this_thread::sleep_for(milliseconds(200));
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

TEST_CASE("liveness: a port nobody listens on is a dead peer", "[transport]") {
  std::uint16_t closed_port = 0;
  { closed_port = Liveness("127.0.0.1", kPeerTimeout, 1).port(); }
  Liveness me("127.0.0.1", kPeerTimeout, 0);
  me.set_address(1, "127.0.0.1", closed_port);
  me.watch(1);
  CHECK(poll_for_a_while(me) == std::vector<int>{1});
}

TEST_CASE("liveness: a live process is heard, a frozen one goes silent and is not lost",
          "[transport]") {
  int port = 0, go = -1;
  pid_t pid = spawn_watched(false, &port, &go);
  Liveness me("127.0.0.1", kPeerTimeout, 0);
  me.set_address(2, "127.0.0.1", static_cast<std::uint16_t>(port));
  me.watch(2);
  // Alive: for a second, never silent for more than a few beats.
  milliseconds loudest{0};
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(milliseconds(50));
    loudest = std::max(loudest, silent_ms(me, 2));
  }
  CHECK(loudest < kPeerTimeout * murmur::testing::kTimeScale);
  // Frozen: its beats stop, it is silent past the peer timeout, but its sockets stay open.
  REQUIRE(::kill(pid, SIGSTOP) == 0);
  std::this_thread::sleep_for(kPeerTimeout * 3);
  CHECK(silent_ms(me, 2) >= kPeerTimeout * 2);
  CHECK(me.poll().empty());
  // Thawed: heard again within a few beats.
  REQUIRE(::kill(pid, SIGCONT) == 0);
  bool heard = false;
  for (int i = 0; i < 100 && !heard; ++i) {
    std::this_thread::sleep_for(milliseconds(20));
    heard = silent_ms(me, 2) < kPeerTimeout;
  }
  CHECK(heard);
  (void)!::write(go, "x", 1);
  ::close(go);
  ::waitpid(pid, nullptr, 0);
  CHECK(poll_for_a_while(me) == std::vector<int>{2});
}

TEST_CASE("liveness: an address rides in front of a backend's name and comes off again",
          "[transport]") {
  Liveness me("127.0.0.1", kPeerTimeout, 0);
  const std::vector<std::byte> name{std::byte{7}, std::byte{8}, std::byte{9}};
  std::vector<std::byte> blob = me.prefixed(name, "127.0.0.1");
  Liveness other("127.0.0.1", kPeerTimeout, 1);
  other.take_address(0, blob, "test");
  CHECK(blob == name);
  other.watch(0);
  std::this_thread::sleep_for(milliseconds(300));
  CHECK(silent_ms(other, 0) < kPeerTimeout);  // the prefix pointed at `me`, which beats
  std::vector<std::byte> cut{std::byte{1}, std::byte{0}, std::byte{9}, std::byte{0}, std::byte{'a'}};
  CHECK_THROWS_WITH(other.take_address(1, cut, "test"), Catch::Contains("rank 1") &&
                                                            Catch::Contains("cut short"));
}

TEST_CASE("liveness: a rank dropped learns it at once, and is not reported lost here",
          "[transport]") {
  Liveness a("127.0.0.1", kPeerTimeout, 0), b("127.0.0.1", kPeerTimeout, 1);
  a.set_address(1, "127.0.0.1", b.port());
  b.set_address(0, "127.0.0.1", a.port());
  a.watch(1);
  b.watch(0);
  std::this_thread::sleep_for(milliseconds(200));  // both connected, ranks sent
  a.drop(1);
  CHECK(poll_for_a_while(b) == std::vector<int>{0});  // b's watch of a was closed by a
  CHECK(a.poll().empty());
}

}  // namespace
}  // namespace murmur::transport
