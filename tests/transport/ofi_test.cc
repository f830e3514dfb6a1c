// The libfabric backend over loopback processes, for the tcp (tcp;ofi_rxm) and shm providers:
// tagged transfers of 0..64 MiB among 2 and 4 ranks, many tags, put into a remote region, and
// refusal of oversized messages.
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
#include "transport/ofi/make.h"
#include "transport/ofi/region.h"
#include "transport/ofi/transport.h"

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

testing::Env env_for(const std::string&) { return {{"FI_TCP_IFACE", "lo"}}; }

TransportConfig config_for(const std::string& provider) {
  TransportConfig c;
  c.host = "127.0.0.1";
  c.connect_timeout_ms = murmur::testing::scaled_ms(20000);
  c.ofi_provider = provider;
  return c;
}

Deadline soon() { return deadline_after(murmur::testing::scaled(std::chrono::seconds(30))); }

void all_to_all(const std::string& provider, int rank, Bootstrap& bootstrap, int world) {
  auto t = ofi::make_transport(config_for(provider), rank, world, bootstrap);
  const std::size_t max = kSizes.back();
  std::vector<std::byte> out(max), in(max * world);
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
      expect(reqs[2 * i].state()->bytes == size,
             "recv length " + std::to_string(size) + " got " +
                 std::to_string(reqs[2 * i].state()->bytes));
      ++i;
      expect(matches(std::span(in).subspan(p * max, size), size + p),
             "bytes of " + std::to_string(size) + " from rank " + std::to_string(p));
    }
  }
  expect(t->bytes_received() == t->bytes_sent(), "symmetric byte counters");
}

TEST_CASE("ofi: tagged transfers of 0..64 MiB among 2 and 4 ranks", "[ofi][multiproc]") {
  const std::string provider = GENERATE(as<std::string>{}, "tcp", "shm");
  const int world = GENERATE(2, 4);
  INFO("provider " << provider << ", " << world << " ranks");
  auto codes = run_ranks(world, env_for(provider), [&](int r, Bootstrap& b) {
    all_to_all(provider, r, b, world);
  });
  CHECK(codes == std::vector<int>(world, 0));
}

TEST_CASE("ofi: many tags match out of order among 4 ranks", "[ofi][multiproc]") {
  const std::string provider = GENERATE(as<std::string>{}, "tcp", "shm");
  INFO("provider " << provider);
  auto codes = run_ranks(4, env_for(provider), [&](int rank, Bootstrap& bootstrap) {
    constexpr int kWorld = 4, kTags = 64;
    constexpr std::size_t kSize = 3000;
    auto t = ofi::make_transport(config_for(provider), rank, kWorld, bootstrap);
    std::vector<std::byte> out(kTags * kSize), in(kWorld * kTags * kSize);
    auto out_region = t->register_region(out);
    auto in_region = t->register_region(in);
    for (int k = 0; k < kTags; ++k) fill(std::span(out).subspan(k * kSize, kSize), rank * 1000 + k);
    std::vector<Request> reqs;
    const Tag big = Tag{1} << 58;  // 4 ranks leave 60 bits (2 of rank, 2 of kind)
    for (int p = 0; p < kWorld; ++p) {
      for (int k = kTags - 1; p != rank && k >= 0; --k) {
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

TEST_CASE("ofi: put lands in the remote region", "[ofi][multiproc]") {
  const std::string provider = GENERATE(as<std::string>{}, "tcp", "shm");
  INFO("provider " << provider);
  auto codes = run_ranks(2, env_for(provider), [&](int rank, Bootstrap& bootstrap) {
    constexpr std::size_t kSize = 16 << 20, kOffset = 4096;
    auto t = ofi::make_transport(config_for(provider), rank, 2, bootstrap);
    expect(t->supports_put(), "provider has FI_RMA");
    std::vector<std::byte> target(kSize + kOffset), source(kSize), flag(8);
    auto target_region = t->register_region(target);
    auto source_region = t->register_region(source);
    auto flag_region = t->register_region(flag);
    fill(source, 77 + rank);
    const int peer = 1 - rank;
    const std::vector<int> peers = {peer};
    auto keys = bootstrap.exchange(peers, target_region->remote_key(), soon());
    Request seen = t->recv(peer, 9, *flag_region, {0, 8});  // progress for the peer's put
    Request put = t->put(peer, *source_region, {0, kSize}, keys[0], kOffset);
    expect(t->wait(put, soon()), "put completes");
    Request note = t->send(peer, 9, *flag_region, {0, 8});
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

// libfabric 1.17 loses its way after a truncated message (tcp;ofi_rxm drops the next eager one,
// shm never completes a truncated segmented one), so the backend never lets the provider
// truncate: an inline message (3000 bytes) is refused from its head, an announced one (100000
// bytes) by the clear-to-send. Both kinds, on both providers, and the next message arrives.
TEST_CASE("ofi: oversized messages are refused", "[ofi][multiproc]") {
  const std::string provider = GENERATE(as<std::string>{}, "tcp", "shm");
  INFO("provider " << provider);
  auto codes = run_ranks(2, env_for(provider), [&](int rank, Bootstrap& bootstrap) {
    TransportConfig c = config_for(provider);
    const std::size_t frame = 65536;
    c.max_frame_bytes = rank == 0 ? (1 << 20) : frame;
    auto t = ofi::make_transport(c, rank, 2, bootstrap);
    std::vector<std::byte> buf(1 << 20);
    auto region = t->register_region(buf);
    if (rank == 0) {
      std::vector<Request> reqs = {t->send(1, 1, *region, {0, 3000}),
                                   t->send(1, 2, *region, {0, 100000}),
                                   t->send(1, 3, *region, {0, 16})};
      Request done = t->recv(1, 4, *region, {0, 1});
      expect(wait_all(*t, reqs, soon()), "sends complete");
      expect(t->wait(done, soon()), "rank 1 finished");
      return;
    }
    bool too_big_to_send = false;
    try {
      t->send(0, 5, *region, {0, frame + 1});
    } catch (const ProtocolError&) {
      too_big_to_send = true;
    }
    expect(too_big_to_send, "send over max_frame_bytes throws ProtocolError");
    Request small = t->recv(0, 1, *region, {0, 100});         // shorter than the message
    Request oversized = t->recv(0, 2, *region, {0, 1 << 20}); // over this rank's max frame
    Request fine = t->recv(0, 3, *region, {0, 4096});
    for (Request* r : {&small, &oversized}) {
      std::string outcome = "completed with " + std::to_string(r->state()->bytes) + " bytes";
      try {
        if (!t->wait(*r, soon())) outcome = "timed out";
      } catch (const ProtocolError&) {
        outcome = "";
      } catch (const std::exception& e) {
        outcome = e.what();
      }
      expect(outcome.empty(), "recv of a longer message throws ProtocolError, not: " + outcome);
    }
    expect(t->wait(fine, soon()) && fine.state()->bytes == 16, "a later message still arrives");
    Request done = t->send(0, 4, *region, {0, 1});
    expect(t->wait(done, soon()), "done sent");
  });
  CHECK(codes == std::vector<int>{0, 0});
}

}  // namespace
}  // namespace murmur::transport
