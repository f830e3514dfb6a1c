// The pipelined gossip round (runtime/device_gossip.h) with the host stager, on forked ranks over
// tcp and ucx (the transport harness): its result is bitwise D-PSGD's, for chunk sizes that cut the
// array unevenly and for static and time-varying graphs; a chunk of the wrong size is a
// ProtocolError naming the rank that sent it.
#include <catch2/catch.hpp>
#include <cstring>
#include <stdlib.h>

#include <fmt/format.h>

#include "core/error.h"
#include "core/rng.h"
#include "optimizers/averaging.h"
#include "runtime/chunk_stager.h"
#include "runtime/device_gossip.h"
#include "tests/time_scale.h"
#include "tests/transport/backends.h"

namespace murmur::runtime {
namespace {

namespace tt = transport::testing;

std::vector<float> random_vector(std::uint64_t seed, int rank, std::size_t n) {
  Rng rng = Rng(seed).fork(static_cast<std::uint64_t>(rank));
  std::vector<float> x(n);
  for (auto& v : x) v = static_cast<float>(rng.normal());
  return x;
}

ExperimentConfig gossip_config(int n, const std::string& graph, std::size_t chunk_bytes) {
  ExperimentConfig c;
  c.world.size = n;
  c.run.device = "cuda";  // what uses_pipelined_gossip asks for; nothing here touches a GPU
  c.algorithm.name = "dpsgd";
  c.topology.graph = graph;
  c.transport.chunk_bytes = static_cast<std::int64_t>(chunk_bytes);
  c.transport.recv_timeout_ms = murmur::testing::scaled_ms(20000);
  c.run.seed = 11;
  return c;
}

tt::RunOptions run_options() {
  tt::RunOptions o;
  o.timeout = std::chrono::seconds(60);
  o.configure = [](TransportConfig&, int) {  // loopback for UCX (in the children, after fork)
    ::setenv("UCX_TLS", "tcp,self", 1);
    ::setenv("UCX_NET_DEVICES", "lo", 1);
  };
  return o;
}

// tcp, and ucx where built: the chunk tags must fit beside UCX's source-rank bits too.
std::vector<std::string> process_backends() {
  std::vector<std::string> out;
  for (const auto& b : tt::built_backends()) {
    if (b == "tcp" || b == "ucx") out.push_back(b);
  }
  return out;
}

TEST_CASE("chunk layout and chunk tags", "[gossip]") {
  const ChunkLayout layout(5000, 4096);
  CHECK(layout.chunk_floats == 1024);
  CHECK(layout.count() == 5);
  CHECK(layout.size(3) == 1024);
  CHECK(layout.size(4) == 5000 - 4 * 1024);
  CHECK(layout.bytes(4).offset == 4 * 4096);
  CHECK(ChunkLayout(10, 6).chunk_floats == 1);  // rounded down to whole floats, at least one
  CHECK(ChunkLayout(0, 4096).count() == 0);
  CHECK_THROWS_AS(ChunkLayout(std::size_t{1} << 22, 4), ConfigError);  // 2^22 chunks > 2^20

  using optimizers::chunk_tag;
  using optimizers::Purpose;
  CHECK(chunk_tag(Purpose::kGossipChunk, 3, 5) != chunk_tag(Purpose::kGossipChunk, 3, 6));
  CHECK(chunk_tag(Purpose::kGossipChunk, 3, 5) != chunk_tag(Purpose::kGossipChunk, 4, 5));
  CHECK(chunk_tag(Purpose::kGossipChunk, 3, 5) >> 48 == 7);
  CHECK(chunk_tag(Purpose::kGossipChunk, 3, 5) != optimizers::p2p_tag(Purpose::kGossip, 3));
  CHECK(chunk_tag(Purpose::kGossipChunk, (std::int64_t{1} << 28) + 2, 0) ==
        chunk_tag(Purpose::kGossipChunk, 2, 0));  // rounds wrap within their 28 bits
  CHECK_THROWS_AS(chunk_tag(Purpose::kGossipChunk, 0, optimizers::kMaxChunks), Error);
}

TEST_CASE("which runs take the pipelined path", "[gossip]") {
  auto c = gossip_config(4, "ring", 4096);
  CHECK(uses_pipelined_gossip(c));
  c.algorithm.overlap = true;
  CHECK_FALSE(uses_pipelined_gossip(c));
  c = gossip_config(4, "ring", 4096);
  c.run.on_peer_failure = "continue";
  CHECK_FALSE(uses_pipelined_gossip(c));
  c = gossip_config(4, "ring", 4096);
  c.algorithm.name = "sgp";
  CHECK_FALSE(uses_pipelined_gossip(c));
  c = gossip_config(4, "ring", 4096);
  c.run.device = "cpu";
  CHECK_FALSE(uses_pipelined_gossip(c));
  CHECK_FALSE(uses_pipelined_gossip(gossip_config(1, "ring", 4096)));
}

// Each rank runs the same rounds twice from the same start, once chunked through the host
// stager and once through optimizers::Dpsgd, on one transport (their tags differ), and the two
// results must agree to the bit after every round.
TEST_CASE("pipelined gossip is bitwise D-PSGD", "[gossip][multiproc]") {
  const std::string backend = GENERATE(from_range(process_backends()));
  const int n = GENERATE(3, 4);
  const std::string graph = GENERATE(as<std::string>{}, "ring", "one_peer_exponential");
  // 5000 floats in 1024-float chunks (the last 904), and in 251-float ones (the last 231).
  const std::size_t chunk_bytes = GENERATE(std::size_t{4096}, std::size_t{1004});
  CAPTURE(backend, n, graph, chunk_bytes);
  constexpr std::size_t kDim = 5000;
  constexpr int kRounds = 4;
  const auto config = gossip_config(n, graph, chunk_bytes);
  auto body = [&](tt::RankContext& ctx) {
    auto& transport = ctx.transport();
    std::vector<float> chunked = random_vector(config.run.seed, ctx.rank(), kDim);
    std::vector<float> reference = chunked;
    const std::vector<float> initial = chunked;
    HostStager stager(transport, chunked, chunk_bytes);
    MURMUR_CHECK(stager.layout().count() > 2);
    PipelinedGossip gossip(config, transport, stager);
    auto region = transport.register_region(std::as_writable_bytes(std::span(reference)));
    optimizers::AveragingContext actx{config.algorithm, config.topology, config.transport,
                                      transport,        *region,         reference,
                                      config.run.seed};
    auto dpsgd = optimizers::make_averaging(actx);
    for (int step = 1; step <= kRounds; ++step) {
      gossip.after_step(step);
      dpsgd->after_step(step);
      MURMUR_CHECK(std::memcmp(chunked.data(), reference.data(), kDim * sizeof(float)) == 0);
      if (step == 1) MURMUR_CHECK(chunked != initial);  // a round happened: not vacuous
      // A local change between rounds, the same on both copies, as a training step would make.
      for (std::size_t i = ctx.rank(); i < kDim; i += 97) {
        chunked[i] += 0.5f;
        reference[i] += 0.5f;
      }
    }
    MURMUR_CHECK(gossip.take_stats().comm_s > 0);
  };
  const auto failures = tt::failures(tt::run_ranks(backend, n, body, run_options()));
  INFO(failures);
  CHECK(failures.empty());
}

// Rank 0 runs a round; rank 1 plays a peer whose chunk 2 is 4 bytes short (rank 0's own size
// check) or 4 bytes long (the transport refuses it). Rank 0 must get a ProtocolError naming
// rank 1, with nothing left in flight; it then acks, so that rank 1 exits only after rank 0
// has read everything (a socket closed early could lose the chunks in flight).
TEST_CASE("a chunk of the wrong size is a ProtocolError naming the sender", "[gossip][multiproc]") {
  const int delta = GENERATE(-4, 4);
  CAPTURE(delta);
  constexpr std::size_t kDim = 5000;
  const auto config = gossip_config(2, "complete", 4096);
  const transport::Tag kAck = 0x1234;
  auto body = [&](tt::RankContext& ctx) {
    auto& transport = ctx.transport();
    std::vector<float> params = random_vector(config.run.seed, ctx.rank(), kDim + 16);
    auto region = transport.register_region(std::as_writable_bytes(std::span(params)));
    const auto ack_range = transport::ByteRange{0, sizeof(float)};
    const auto deadline = [] { return transport::deadline_after(std::chrono::seconds(20)); };
    if (ctx.rank() == 1) {
      const ChunkLayout layout(kDim, 4096);
      std::vector<transport::Request> sends;
      // Up to the bad chunk only: a later one could be landing in its receive when rank 0 gives
      // up, and cancelling a receive that is being filled closes the connection (tcp), which
      // then fails the ack (seen under TSan).
      for (std::size_t k = 0; k <= 2; ++k) {
        transport::ByteRange range = layout.bytes(k);
        if (k == 2) range.size = static_cast<std::size_t>(static_cast<long>(range.size) + delta);
        sends.push_back(transport.send(
            0, optimizers::chunk_tag(optimizers::Purpose::kGossipChunk, 0, k), *region, range));
      }
      auto ack = transport.recv(0, kAck, *region, ack_range);
      MURMUR_CHECK(transport.wait(ack, deadline()));
      MURMUR_CHECK(transport::wait_all(transport, sends, deadline()));
      return;
    }
    std::span<float> mine(params.data(), kDim);
    HostStager stager(transport, mine, 4096);
    PipelinedGossip gossip(config, transport, stager);
    std::string what;
    try {
      gossip.round(0);
    } catch (const ProtocolError& e) {
      what = e.what();
    }
    auto ack = transport.send(1, kAck, *region, ack_range);
    MURMUR_CHECK(transport.wait(ack, deadline()));
    if (what.find("rank 1") == std::string::npos) {
      throw std::runtime_error("expected a ProtocolError naming rank 1, got: '" + what + "'");
    }
  };
  const auto failures = tt::failures(tt::run_ranks("tcp", 2, body, run_options()));
  INFO(failures);
  CHECK(failures.empty());
}

}  // namespace
}  // namespace murmur::runtime
