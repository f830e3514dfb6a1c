// The tcp backend against a hand-written peer on a raw socket: corrupted frames, absurd length
// fields, a wrong shared secret, an intruder who skips the proof, and heartbeats (a peer is heard
// while it beats, silent once it stops; drop() closes the connection). The transport under test
// is rank 1 of a world of 2; the raw socket plays rank 0 (the lower rank dials).
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "tests/time_scale.h"
#include "transport/factory.h"
#include "transport/frame.h"
#include "transport/handshake.h"
#include "transport/rendezvous.h"
#include "transport/tcp/transport.h"

namespace murmur::transport {
namespace {

Deadline soon() { return deadline_after(murmur::testing::scaled(std::chrono::seconds(20))); }

std::string secret_file(const std::string& name, const std::string& secret) {
  auto path = std::filesystem::temp_directory_path() / ("murmur-secret-" + name + "-" + std::to_string(::getpid()));
  std::ofstream(path) << secret << "\n";
  return path.string();
}

TransportConfig config_with_secret(const std::string& secret) {
  TransportConfig c;
  c.host = "127.0.0.1";
  c.connect_timeout_ms = murmur::testing::scaled_ms(10000);
  c.recv_timeout_ms = murmur::testing::scaled_ms(10000);
  c.max_frame_bytes = 1 << 20;
  c.secret_file = secret_file(secret, secret);
  return c;
}

// A blocking socket that speaks the wire format by hand.
class RawPeer {
 public:
  explicit RawPeer(const std::string& address) {
    auto colon = address.rfind(':');
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1))));
    ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr);
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  }
  ~RawPeer() { ::close(fd_); }
  void write(std::span<const std::byte> b) {
    const bool sent = ::send(fd_, b.data(), b.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(b.size());
    // A refused peer may find the connection already closed: that is the refusal.
    if (!may_be_refused) REQUIRE(sent);
  }
  bool may_be_refused = false;
  bool read(std::span<std::byte> b) {
    std::size_t got = 0;
    while (got < b.size()) {
      ssize_t n = ::recv(fd_, b.data() + got, b.size() - got, 0);
      if (n <= 0) return false;
      got += n;
    }
    return true;
  }
  // Runs the dialer's side as rank 0; with `honest` false it sends a made-up proof.
  void handshake(const std::string& secret, bool honest = true) {
    Hello hello{0, 2, fresh_nonce()};
    write(encode(hello));
    std::array<std::byte, Reply::kBytes> reply_bytes;
    REQUIRE(read(reply_bytes));
    Reply reply = decode_reply(reply_bytes, "test");
    Proof proof{honest ? handshake_mac(secret, kProofLabel, hello, reply.nonce, 1) : Mac{}};
    write(encode(proof));
  }
  void heartbeat() {
    FrameHeader h{FrameKind::kHeartbeat, 0, 0, 0, 0, 0};
    h.crc = header_crc(h);
    write(encode(h));
  }
  void frame(Tag tag, std::vector<std::byte> payload, bool corrupt, std::uint64_t length_field) {
    FrameHeader h{FrameKind::kData, tag, length_field, 0, length_field, 0};
    h.crc = payload_crc(header_crc(h), payload);
    if (corrupt) payload[payload.size() / 2] ^= std::byte{1};
    write(encode(h));
    write(payload);
  }
  // One frame of a message of `total` bytes, its payload at `offset`.
  void piece(Tag tag, std::span<const std::byte> payload, std::uint64_t offset, std::uint64_t total) {
    FrameHeader h{FrameKind::kData, tag, payload.size(), offset, total, 0};
    h.crc = payload_crc(header_crc(h), payload);
    write(encode(h));
    write(payload);
  }
  void abort(Tag tag, std::uint64_t offset, std::uint64_t total) {
    FrameHeader h{FrameKind::kAbort, tag, 0, offset, total, 0};
    h.crc = header_crc(h);
    write(encode(h));
  }
  // The next frame that is not a heartbeat; its payload into `payload`. False at EOF.
  bool next(FrameHeader* h, std::vector<std::byte>* payload) {
    FrameBytes header;
    do {
      if (!read(header)) return false;
      *h = decode(header, std::uint64_t{1} << 30, "rank 1");
    } while (h->kind == FrameKind::kHeartbeat);
    payload->resize(h->length);
    return read(*payload);
  }

 private:
  int fd_ = -1;
};

TransportConfig with_peer_timeout(TransportConfig c, int peer_timeout_ms) {
  c.peer_timeout_ms = peer_timeout_ms;
  return c;
}

struct Receiver {
  explicit Receiver(const std::string& secret, int peer_timeout_ms = 10000)
      : rendezvous(std::make_shared<MemoryRendezvous>()),
        transport(with_peer_timeout(config_with_secret(secret), peer_timeout_ms), 1, 2, rendezvous),
        buffer(4096),
        region(transport.register_region(buffer)) {}
  std::shared_ptr<MemoryRendezvous> rendezvous;
  tcp::Transport transport;
  std::vector<std::byte> buffer;
  std::unique_ptr<Region> region;
};

TEST_CASE("tcp: a corrupted frame is rejected with ProtocolError", "[transport][tcp]") {
  Receiver rx("s3cret");
  Request r = rx.transport.recv(0, 9, *rx.region, {0, 4096});
  RawPeer peer(rx.transport.local_address());
  peer.handshake("s3cret");
  peer.frame(9, std::vector<std::byte>(1000, std::byte{42}), /*corrupt=*/true, 1000);
  CHECK_THROWS_AS(rx.transport.wait(r, soon()), ProtocolError);
}

TEST_CASE("tcp: an intact frame from the hand-written peer is accepted", "[transport][tcp]") {
  // The control for the test above: the same path without the flipped bit succeeds.
  Receiver rx("s3cret");
  Request r = rx.transport.recv(0, 9, *rx.region, {0, 4096});
  RawPeer peer(rx.transport.local_address());
  peer.handshake("s3cret");
  peer.frame(9, std::vector<std::byte>(1000, std::byte{42}), false, 1000);
  REQUIRE(rx.transport.wait(r, soon()));
  CHECK(r.state()->bytes == 1000);
  CHECK(rx.buffer[999] == std::byte{42});
}

TEST_CASE("tcp: a huge length field is refused before anything is allocated", "[transport][tcp]") {
  Receiver rx("s3cret");
  RawPeer peer(rx.transport.local_address());
  peer.handshake("s3cret");
  // No recv is posted, so an unchecked length would size an unexpected-message buffer of 1 TiB.
  peer.frame(3, std::vector<std::byte>(16), false, std::uint64_t{1} << 40);
  Request r = rx.transport.recv(0, 3, *rx.region, {0, 4096});
  try {
    rx.transport.wait(r, soon());
    FAIL("the recv completed");
  } catch (const ProtocolError& e) {
    CHECK_THAT(e.what(), Catch::Contains("max_frame_bytes"));
  }
}

TEST_CASE("tcp: ranks with different secrets refuse each other with AuthError", "[transport][tcp]") {
  auto rendezvous = std::make_shared<MemoryRendezvous>();
  tcp::Transport a(config_with_secret("alpha"), 0, 2, rendezvous);
  tcp::Transport b(config_with_secret("bravo"), 1, 2, rendezvous);
  std::vector<std::byte> x(64), y(64);
  auto rx = a.register_region(x), ry = b.register_region(y);
  Request recv = b.recv(0, 1, *ry, {0, 64});
  Request send = a.send(1, 1, *rx, {0, 64});
  CHECK_THROWS_AS(a.wait(send, soon()), AuthError);
  // Nothing reached rank 1: its recv is still pending.
  CHECK_FALSE(b.wait(recv, deadline_after(std::chrono::milliseconds(300))));
}

TEST_CASE("tcp: an intruder without the secret cannot inject a message", "[transport][tcp]") {
  Receiver rx("s3cret");
  Request r = rx.transport.recv(0, 5, *rx.region, {0, 4096});
  {
    RawPeer intruder(rx.transport.local_address());
    intruder.handshake("guess", /*honest=*/false);
    intruder.may_be_refused = true;  // the receiver may have hung up already
    intruder.frame(5, std::vector<std::byte>(100, std::byte{66}), false, 100);
    CHECK_FALSE(rx.transport.wait(r, deadline_after(std::chrono::milliseconds(300))));
  }
  // The real rank 0 still gets through afterwards.
  TransportConfig c = config_with_secret("s3cret");
  tcp::Transport rank0(c, 0, 2, rx.rendezvous);
  std::vector<std::byte> payload(100, std::byte{7});
  auto region = rank0.register_region(payload);
  Request s = rank0.send(1, 5, *region, {0, 100});
  REQUIRE(rx.transport.wait(r, soon()));
  CHECK(rx.buffer[0] == std::byte{7});
  CHECK(rank0.wait(s, soon()));
}

TEST_CASE("tcp: a peer that beats is waited for; one that stops is found silent", "[transport][tcp]") {
  Receiver rx("s3cret");
  Request r = rx.transport.recv(0, 4, *rx.region, {0, 4096});
  RawPeer peer(rx.transport.local_address());
  peer.handshake("s3cret");
  // The hand-written rank 0 beats every 20 ms for a while, then falls silent (but stays
  // connected, as a cut-off or frozen process would), and never sends the message.
  const auto beating = std::chrono::milliseconds(800);
  std::atomic<bool> stop{false};
  peer.may_be_refused = true;  // no REQUIRE on the beating thread (Catch2 is not thread-safe)
  std::thread beats([&] {
    const auto until = Clock::now() + beating;
    while (Clock::now() < until && !stop) {
      peer.heartbeat();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  const auto silence = murmur::testing::scaled(std::chrono::milliseconds(300));
  const auto start = Clock::now();
  // While it beats, a wait bounded by 200 ms ends at its bound, not for silence.
  CHECK(wait_heard(rx.transport, r, silence, std::chrono::milliseconds(200)) == WaitEnd::kTimedOut);
  // Then, with a long bound, the wait ends once the beats have stopped for `silence`.
  const WaitEnd end = wait_heard(rx.transport, r, silence, murmur::testing::scaled(std::chrono::seconds(20)));
  const auto waited = Clock::now() - start;
  stop = true;
  beats.join();
  CHECK(end == WaitEnd::kSilent);
  CHECK(waited >= beating);
  CHECK(rx.transport.silent_for(0).value() >= silence);
  rx.transport.cancel(r);
}

TEST_CASE("tcp: an idle connection carries the transport's own heartbeats", "[transport][tcp]") {
  Receiver rx("s3cret", /*peer_timeout_ms=*/100);  // a heartbeat every 20 ms
  Request r = rx.transport.recv(0, 4, *rx.region, {0, 4096});
  RawPeer peer(rx.transport.local_address());
  peer.handshake("s3cret");
  FrameBytes header;
  REQUIRE(peer.read(header));  // nothing else is sent on this connection
  const FrameHeader h = decode(header, 1 << 20, "rank 1");
  CHECK(h.kind == FrameKind::kHeartbeat);
  CHECK(h.crc == header_crc(h));
  rx.transport.cancel(r);
}

TEST_CASE("tcp: drop() closes the connection, and the peer stays dropped", "[transport][tcp]") {
  Receiver rx("s3cret");
  Request r = rx.transport.recv(0, 4, *rx.region, {0, 4096});
  RawPeer peer(rx.transport.local_address());
  peer.handshake("s3cret");
  peer.frame(8, std::vector<std::byte>(10, std::byte{1}), false, 10);  // connected and heard
  Request first = rx.transport.recv(0, 8, *rx.region, {0, 4096});
  REQUIRE(rx.transport.wait(first, soon()));
  rx.transport.drop(0);
  CHECK_THROWS_AS(rx.transport.wait(r, soon()), PeerLost);  // pending work fails at once
  // The hand-written peer reads EOF (past any heartbeat that was already on its way).
  FrameBytes header;
  bool open = true;
  for (int i = 0; i < 1000 && open; ++i) open = peer.read(header);
  CHECK_FALSE(open);
  Request later = rx.transport.recv(0, 9, *rx.region, {0, 4096});
  CHECK_THROWS_WITH(rx.transport.wait(later, soon()), Catch::Contains("counts it as dead"));
}

TEST_CASE("tcp: an address that is not IP:port is a ConfigError naming it", "[transport][tcp]") {
  // Its own listen address, from transport.host and port.
  TransportConfig c = config_with_secret("s3cret");
  c.host = "not-an-ip";
  CHECK_THROWS_WITH(tcp::Transport(c, 0, 2, std::make_shared<MemoryRendezvous>()),
                    Catch::Contains("transport.host/port") && Catch::Contains("not-an-ip"));
  // A peer's published address, when dialed.
  auto rendezvous = std::make_shared<MemoryRendezvous>();
  rendezvous->publish(1, "127.0.0.1:99999");
  tcp::Transport dialer(config_with_secret("s3cret"), 0, 2, rendezvous);
  std::vector<std::byte> a(16);
  auto region = dialer.register_region(a);
  Request r = dialer.recv(1, 1, *region, {0, 16});
  CHECK_THROWS_WITH(dialer.wait(r, soon()), Catch::Contains("is not IP:port"));
}

TEST_CASE("tcp: a rank that left in order is PeerLost at once, from either side", "[transport][tcp]") {
  auto rendezvous = std::make_shared<MemoryRendezvous>();
  TransportConfig c = config_with_secret("s3cret");
  c.connect_timeout_ms = murmur::testing::scaled_ms(120000);  // far past what the test waits
  { tcp::Transport gone(c, 1, 3, rendezvous); }  // listens, publishes, and leaves in order
  CHECK(has_left(rendezvous->try_lookup(1).value_or("")));
  tcp::Transport dialer(c, 0, 3, rendezvous);    // the lower rank: would dial rank 1
  tcp::Transport awaiter(c, 2, 3, rendezvous);   // the higher: would await rank 1's dial
  std::vector<std::byte> a(16), b(16);
  auto ra = dialer.register_region(a), rb = awaiter.register_region(b);
  Request from_dialer = dialer.recv(1, 1, *ra, {0, 16});
  Request from_awaiter = awaiter.recv(1, 1, *rb, {0, 16});
  CHECK_THROWS_WITH(dialer.wait(from_dialer, soon()), Catch::Contains("has left the run"));
  CHECK_THROWS_WITH(awaiter.wait(from_awaiter, soon()), Catch::Contains("has left the run"));
}

TEST_CASE("a ucx or ofi peer whose peer left the run in order starts, and is told so",
          "[transport][tcp]") {
  for (const std::string& backend : process_backends()) {
    if (backend == "tcp") continue;
    CAPTURE(backend);
    const auto dir = std::filesystem::temp_directory_path() /
                     ("murmur-left-" + backend + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    // Rank 0 finished (its bootstrap closed in order): its file says it left. A restarted
    // rank 1 starts at once without it (as over tcp: it then trains on alone), and every
    // request to rank 0 fails, saying why.
    std::ofstream(dir / "bootstrap-rank-0.addr") << kLeftMark << "127.0.0.1:9";
    TransportConfig c = config_with_secret("s3cret");
    c.backend = backend;
    c.rendezvous_dir = dir.string();
    c.connect_timeout_ms = murmur::testing::scaled_ms(120000);  // far past what the test waits
    auto t = make_transport(c, 1, 2);
    std::vector<std::byte> buffer(16);
    auto region = t->register_region(buffer);
    Request r = t->recv(0, 1, *region, {0, 16});
    CHECK_THROWS_WITH(t->wait(r, soon()), Catch::Contains("has left the run") &&
                                              Catch::Contains("not met at start"));
    Request s = t->send(0, 1, *region, {0, 16});
    CHECK_THROWS_AS(t->wait(s, soon()), PeerLost);
    region.reset();  // before its transport
    t.reset();
    std::filesystem::remove_all(dir);
  }
}

TEST_CASE("tcp: a recv cancelled mid-message discards the rest; the connection carries on",
          "[transport][tcp]") {
  Receiver rx("s3cret");
  Request r = rx.transport.recv(0, 9, *rx.region, {0, 4096});
  RawPeer peer(rx.transport.local_address());
  peer.handshake("s3cret");
  const std::vector<std::byte> half(1000, std::byte{1});
  peer.piece(9, half, 0, 2000);
  std::this_thread::sleep_for(murmur::testing::scaled(std::chrono::milliseconds(200)));
  rx.transport.cancel(r);  // between the two frames: the first one landed in r
  CHECK_THROWS_WITH(rx.transport.wait(r, soon()), Catch::Contains("cancelled"));
  peer.piece(9, half, 1000, 2000);  // read and discarded
  peer.frame(10, std::vector<std::byte>(500, std::byte{7}), false, 500);
  Request next = rx.transport.recv(0, 10, *rx.region, {0, 4096});
  REQUIRE(rx.transport.wait(next, soon()));  // before the abort frames: PeerLost, closed
  CHECK(next.state()->bytes == 500);
  CHECK(rx.buffer[499] == std::byte{7});
}

TEST_CASE("tcp: an abort frame ends the message under way; its recv waits for the next one",
          "[transport][tcp]") {
  Receiver rx("s3cret");
  Request r = rx.transport.recv(0, 9, *rx.region, {0, 4096});
  RawPeer peer(rx.transport.local_address());
  peer.handshake("s3cret");
  peer.piece(9, std::vector<std::byte>(1000, std::byte{1}), 0, 2000);
  peer.abort(9, 1000, 2000);
  peer.frame(9, std::vector<std::byte>(300, std::byte{5}), false, 300);
  REQUIRE(rx.transport.wait(r, soon()));
  CHECK(r.state()->bytes == 300);
  CHECK(rx.buffer[0] == std::byte{5});
  // An abort of a message that is not under way is a protocol error.
  Request other = rx.transport.recv(0, 11, *rx.region, {0, 4096});
  peer.may_be_refused = true;
  peer.abort(11, 10, 20);
  CHECK_THROWS_AS(rx.transport.wait(other, soon()), ProtocolError);
}

TEST_CASE("tcp: a send cancelled mid-message ends with an abort frame; the connection carries on",
          "[transport][tcp]") {
  Receiver rx("s3cret");
  std::vector<std::byte> big(std::size_t{64} << 20, std::byte{3});  // far more than the socket holds
  auto big_region = rx.transport.register_region(big);
  RawPeer peer(rx.transport.local_address());
  peer.handshake("s3cret");
  std::atomic<bool> first{false}, cancelling{false};
  std::vector<FrameHeader> seen;  // by the reader, read after join()
  bool intact = true;
  std::thread reader([&] {
    FrameHeader h;
    std::vector<std::byte> payload;
    while (peer.next(&h, &payload)) {
      seen.push_back(h);
      if (h.kind == FrameKind::kData && payload_crc(header_crc(h), payload) != h.crc) intact = false;
      if (h.tag == 13) return;  // the message after the cancelled one
      if (!first.exchange(true)) {
        // Hold the writer mid-message until the cancel has reached the I/O thread.
        while (!cancelling) std::this_thread::yield();
        std::this_thread::sleep_for(murmur::testing::scaled(std::chrono::milliseconds(100)));
      }
    }
  });
  Request s = rx.transport.send(0, 12, *big_region, {0, big.size()});
  while (!first) std::this_thread::yield();
  cancelling = true;
  rx.transport.cancel(s);
  CHECK_THROWS_WITH(rx.transport.wait(s, soon()), Catch::Contains("cancelled"));
  Request after = rx.transport.send(0, 13, *rx.region, {0, 100});
  CHECK(rx.transport.wait(after, soon()));
  reader.join();
  CHECK(intact);
  REQUIRE(seen.size() >= 3);
  const FrameHeader& abort = seen[seen.size() - 2];
  CHECK(abort.kind == FrameKind::kAbort);
  CHECK(abort.tag == 12);
  CHECK(abort.offset < big.size());
  CHECK(abort.offset == seen[seen.size() - 3].offset + seen[seen.size() - 3].length);
  CHECK(seen.back().tag == 13);
  CHECK(seen.back().length == 100);
}

}  // namespace
}  // namespace murmur::transport
