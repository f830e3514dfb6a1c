// The UCX backend over loopback processes: tagged transfers of 0..64 MiB over tcp and shared
// memory, many tags across 4 ranks, put into a remote region, refusal of oversized messages, and
// a peer killed mid-transfer (an error within the deadline, never a hang).
#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include <catch2/catch.hpp>

#include "core/config.h"
#include "core/error.h"
#include "tests/time_scale.h"
#include "tests/transport/ucx_harness.h"
#include "transport/ucx/make.h"
#include "transport/ucx/region.h"
#include "transport/ucx/transport.h"

namespace murmur::transport {
namespace {

using testing::expect;
using testing::run_ranks;

std::byte pattern(std::size_t i, std::uint64_t seed) {
  return static_cast<std::byte>((i * 131 + seed * 7 + (i >> 12)) & 0xff);
}
void fill(std::span<std::byte> bytes, std::uint64_t seed) {
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = pattern(i, seed);
}
bool matches(std::span<const std::byte> bytes, std::uint64_t seed) {
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] != pattern(i, seed)) return false;
  }
  return true;
}

const std::vector<std::size_t> kSizes = murmur::testing::data_sizes(
    {0, 1, 7, 4096, 65539, 1 << 20, (8 << 20) + 1, 64 << 20}, (8 << 20) + 1);

testing::Env env_for(const std::string& tls) {
  return {{"UCX_TLS", tls}, {"UCX_NET_DEVICES", "lo"}};
}

TransportConfig test_config(bool peer_failure = true) {
  TransportConfig c;
  c.host = "127.0.0.1";
  c.connect_timeout_ms = murmur::testing::scaled_ms(20000);
  c.ucx_peer_failure = peer_failure;
  return c;
}

Deadline soon() { return deadline_after(murmur::testing::scaled(std::chrono::seconds(30))); }

// Every rank sends each size to every other rank and checks what it receives.
void all_to_all(int rank, Bootstrap& bootstrap, int world, bool peer_failure = true) {
  auto t = ucx::make_transport(test_config(peer_failure), rank, world, bootstrap);
  const std::size_t max = kSizes.back();
  std::vector<std::byte> out(max);
  std::vector<std::byte> in(max * world);
  auto out_region = t->register_region(out);
  auto in_region = t->register_region(in);
  for (std::size_t size : kSizes) {
    fill(std::span(out).first(size), size + rank);
    std::vector<Request> reqs;
    for (int p = 0; p < world; ++p) {
      if (p == rank) continue;
      reqs.push_back(t->recv(p, size, *in_region, {p * max, max}));
      reqs.push_back(t->send(p, size, *out_region, {0, size}));
    }
    expect(wait_all(*t, reqs, soon()), "transfers of " + std::to_string(size) + " finish");
    for (int p = 0, i = 0; p < world; ++p) {
      if (p == rank) continue;
      expect(reqs[2 * i].state()->bytes == size, "recv length " + std::to_string(size) + " got " + std::to_string(reqs[2 * i].state()->bytes));
      ++i;
      expect(matches(std::span(in).subspan(p * max, size), size + p),
             "bytes of " + std::to_string(size) + " from rank " + std::to_string(p));
    }
  }
  expect(t->bytes_received() == t->bytes_sent(), "symmetric byte counters");
}

TEST_CASE("ucx: tagged transfers of 0..64 MiB between 2 ranks", "[ucx][multiproc]") {
  const std::string tls = GENERATE(as<std::string>{}, "tcp,self", "posix,self", "sm,self");
  INFO("UCX_TLS=" << tls);
  auto codes = run_ranks(2, env_for(tls), [](int r, Bootstrap& b) { all_to_all(r, b, 2); });
  CHECK(codes == std::vector<int>{0, 0});
}

// transport.ucx_peer_failure: false (error mode NONE) lets UCX pick posix/sysv shared memory
// beside cma and tcp; the bytes must be the same.
TEST_CASE("ucx: without peer-failure mode, transfers of 0..64 MiB are intact", "[ucx][multiproc]") {
  const std::string tls = GENERATE(as<std::string>{}, "posix,self", "sm,tcp,self");
  INFO("UCX_TLS=" << tls);
  auto codes = run_ranks(2, env_for(tls), [](int r, Bootstrap& b) { all_to_all(r, b, 2, false); });
  CHECK(codes == std::vector<int>{0, 0});
}

TEST_CASE("ucx: tagged transfers of 0..64 MiB among 4 ranks", "[ucx][multiproc]") {
  const std::string tls = GENERATE(as<std::string>{}, "tcp,self", "sm,self");
  INFO("UCX_TLS=" << tls);
  auto codes = run_ranks(4, env_for(tls), [](int r, Bootstrap& b) { all_to_all(r, b, 4); });
  CHECK(codes == std::vector<int>(4, 0));
}

TEST_CASE("ucx: many tags match out of order among 4 ranks", "[ucx][multiproc]") {
  auto codes = run_ranks(4, env_for("tcp,sm,self"), [](int rank, Bootstrap& bootstrap) {
    constexpr int kWorld = 4, kTags = 64;
    constexpr std::size_t kSize = 3000;  // eager on every transport
    auto t = ucx::make_transport(test_config(), rank, kWorld, bootstrap);
    std::vector<std::byte> out(kTags * kSize), in(kWorld * kTags * kSize);
    auto out_region = t->register_region(out);
    auto in_region = t->register_region(in);
    for (int k = 0; k < kTags; ++k) fill(std::span(out).subspan(k * kSize, kSize), rank * 1000 + k);
    std::vector<Request> reqs;
    const Tag big = Tag{1} << 60;  // high user bits survive next to the source-rank bits
    for (int p = 0; p < kWorld; ++p) {
      if (p == rank) continue;
      for (int k = kTags - 1; k >= 0; --k) {  // posted in the reverse order of the sends
        reqs.push_back(t->recv(p, big + k, *in_region, {(p * kTags + k) * kSize, kSize}));
      }
    }
    for (int k = 0; k < kTags; ++k) {
      for (int p = 0; p < kWorld; ++p) {
        if (p != rank) reqs.push_back(t->send(p, big + k, *out_region, {k * kSize, kSize}));
      }
    }
    expect(wait_all(*t, reqs, soon()), "all tags arrive");
    for (int p = 0; p < kWorld; ++p) {
      for (int k = 0; p != rank && k < kTags; ++k) {
        expect(matches(std::span(in).subspan((p * kTags + k) * kSize, kSize), p * 1000 + k),
               "tag " + std::to_string(k) + " from rank " + std::to_string(p));
      }
    }
  });
  CHECK(codes == std::vector<int>(4, 0));
}

TEST_CASE("ucx: put lands in the remote region", "[ucx][multiproc]") {
  const std::string tls = GENERATE(as<std::string>{}, "tcp,self", "posix,self", "sm,self");
  INFO("UCX_TLS=" << tls);
  auto codes = run_ranks(2, env_for(tls), [](int rank, Bootstrap& bootstrap) {
    constexpr std::size_t kSize = 16 << 20, kOffset = 4096;
    auto t = ucx::make_transport(test_config(), rank, 2, bootstrap);
    expect(t->supports_put(), "ucx supports put");
    std::vector<std::byte> target(kSize + kOffset), source(kSize), flag(8);
    auto target_region = t->register_region(target);
    auto source_region = t->register_region(source);
    auto flag_region = t->register_region(flag);
    fill(source, 77 + rank);
    const int peer = 1 - rank;
    const std::vector<int> peers = {peer};
    auto keys = bootstrap.exchange(peers, target_region->remote_key(), soon());
    Request put = t->put(peer, *source_region, {0, kSize}, keys[0], kOffset);
    expect(t->wait(put, soon()), "put completes");
    // The put is remote-complete once its request is: a tag message then tells the peer.
    Request note = t->send(peer, 9, *flag_region, {0, 8});
    Request seen = t->recv(peer, 9, *flag_region, {0, 8});
    expect(t->wait(note, soon()) && t->wait(seen, soon()), "notes exchanged");
    expect(matches(std::span(target).subspan(kOffset, kSize), 77 + peer), "put bytes");
    expect(std::all_of(target.begin(), target.begin() + kOffset,
                       [](std::byte b) { return b == std::byte{0}; }),
           "bytes before the offset untouched");
    bool refused = false;
    try {
      t->put(peer, *source_region, {0, kSize}, keys[0], kOffset + 1);
    } catch (const TransportError&) {
      refused = true;
    }
    expect(refused, "a put past the remote region is refused");
  });
  CHECK(codes == std::vector<int>{0, 0});
}

TEST_CASE("ucx: oversized messages are refused", "[ucx][multiproc]") {
  auto codes = run_ranks(2, env_for("tcp,self"), [](int rank, Bootstrap& bootstrap) {
    TransportConfig c = test_config();
    c.max_frame_bytes = rank == 0 ? (1 << 20) : 4096;  // rank 1 accepts at most 4 KiB
    auto t = ucx::make_transport(c, rank, 2, bootstrap);
    std::vector<std::byte> buf(1 << 20);
    auto region = t->register_region(buf);
    if (rank == 0) {
      std::vector<Request> reqs = {t->send(1, 1, *region, {0, 200}),
                                   t->send(1, 2, *region, {0, 100000}),
                                   t->send(1, 3, *region, {0, 16})};
      expect(wait_all(*t, reqs, soon()), "sends complete");
      Request done = t->recv(1, 4, *region, {0, 1});
      expect(t->wait(done, soon()), "rank 1 finished");
      return;
    }
    bool too_big_to_send = false;
    try {
      t->send(0, 5, *region, {0, 8192});
    } catch (const ProtocolError&) {
      too_big_to_send = true;
    }
    expect(too_big_to_send, "send over max_frame_bytes throws ProtocolError");
    Request small = t->recv(0, 1, *region, {0, 100});        // 200 bytes come: too long
    Request oversized = t->recv(0, 2, *region, {0, 1 << 20}); // over this rank's max frame
    Request fine = t->recv(0, 3, *region, {0, 4096});
    for (Request* r : {&small, &oversized}) {
      bool refused = false;
      try {
        t->wait(*r, soon());
      } catch (const ProtocolError&) {
        refused = true;
      }
      expect(refused, "recv of a longer message throws ProtocolError");
    }
    expect(t->wait(fine, soon()) && fine.state()->bytes == 16, "a later message still arrives");
    Request done = t->send(0, 4, *region, {0, 1});
    expect(t->wait(done, soon()), "done sent");
  });
  CHECK(codes == std::vector<int>{0, 0});
}

// Over tcp the endpoint's error handler names the dead rank. With only posix/sysv (no peer
// failure handler in UCX 1.13) the backend connects without one, and the contract is weaker:
// the wait reaches its deadline instead of hanging.
TEST_CASE("ucx: a peer killed mid-transfer fails the wait within its deadline",
          "[ucx][multiproc]") {
  const std::string tls = GENERATE(as<std::string>{}, "tcp,self", "tcp,sm,self", "posix,self");
  INFO("UCX_TLS=" << tls);
  // Over every TLS, shared memory without UCX's peer-failure handler too: the liveness socket
  // (transport/liveness.h) closes with the process.
  auto codes = run_ranks(2, env_for(tls), [](int rank, Bootstrap& bootstrap) {
    constexpr std::size_t kSize = 64 << 20;
    auto t = ucx::make_transport(test_config(), rank, 2, bootstrap);
    std::vector<std::byte> buf(kSize);
    auto region = t->register_region(buf);
    if (rank == 0) {
      Request r = t->send(1, 1, *region, {0, kSize});
      t->test(r);
      raise(SIGKILL);  // dies with the transfer in flight
    }
    Request r = t->recv(0, 1, *region, {0, kSize});
    Request never = t->recv(0, 2, *region, {0, 16});
    const auto limit = murmur::testing::scaled(std::chrono::seconds(30));
    // What ended the wait, for the message if it was not PeerLost naming rank 0.
    std::string ended = "both waits reached their deadline";
    bool lost = false;
    try {
      // Either the 64 MiB got through before the kill, or the wait fails; then the second
      // recv, which nothing will ever match, must fail.
      if (!t->wait(r, deadline_after(limit))) {
        ended = "the 64 MiB recv reached its deadline";
      } else if (!t->wait(never, deadline_after(limit))) {
        ended = "the 64 MiB arrived; the second recv reached its deadline";
      }
    } catch (const PeerLost& e) {
      ended = std::string("PeerLost: ") + e.what();
      lost = std::string(e.what()).find("rank 0") != std::string::npos;
    } catch (const std::exception& e) {
      ended = std::string("not PeerLost: ") + e.what();
    }
    expect(lost, "PeerLost naming rank 0 (" + ended + ")");
  });
  CHECK(codes[0] == 128 + SIGKILL);
  CHECK(codes[1] == 0);
}

TEST_CASE("ucx: tags, ranges and peers are checked before UCX sees them", "[ucx]") {
  testing::TempDir dir;
  testing::DirBootstrap bootstrap(dir.path, 0, 4);
  const std::vector<int> no_peers;
  ucx::Transport t(test_config(), 0, 4, bootstrap, no_peers);
  CHECK(t.max_tag() == (Tag{1} << 62) - 1);
  CHECK(t.name() == "ucx");
  std::vector<std::byte> buf(64);
  auto region = t.register_region(buf);
  CHECK_THROWS_AS(t.send(1, 1, *region, {0, 8}), TransportError);   // not a connected peer
  CHECK_THROWS_AS(t.recv(5, 1, *region, {0, 8}), TransportError);   // outside the world
  CHECK_THROWS_AS(ucx::parse_remote_key(std::vector<std::byte>(3)), ProtocolError);
  CHECK(region->remote_key().size() > 16);
  CHECK(t.register_region({})->remote_key().empty());
}

TEST_CASE("ucx: device memory is offered only where the context reports CUDA", "[ucx]") {
  testing::TempDir dir;
  testing::DirBootstrap bootstrap(dir.path, 0, 2);
  const std::vector<int> no_peers;
  ucx::Transport t(test_config(), 0, 2, bootstrap, no_peers);
  WARN("this UCX " << (t.supports_device_memory() ? "supports" : "does not support")
                   << " CUDA memory (ucp_context_query)");
  if (!t.supports_device_memory()) {
    std::vector<std::byte> host(64);  // never touched: registration is refused first
    CHECK_THROWS_AS(t.register_device_region(host), TransportError);
  }
}

}  // namespace
}  // namespace murmur::transport
