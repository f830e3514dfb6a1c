// Each algorithm's communication plan (what the cost model prices) against a hand count of
// what it sends: phases, message sizes and bytes per step, for the exact averages (ring and
// halving-doubling, buckets, a 16-bit wire, DGC's sparse levels), the gossip family on several
// graphs, and the schedules that send every H steps.
#include <catch2/catch.hpp>

#include "optimizers/algorithm.h"
#include "optimizers/comm_plan.h"

namespace murmur::optimizers {
namespace {

constexpr std::size_t kFloats = 1000;
constexpr double kBytes = 4.0 * kFloats;

ExperimentConfig config(const std::string& algorithm, int n, const std::string& graph = "ring") {
  ExperimentConfig c;
  c.world.size = n;
  c.algorithm.name = algorithm;
  c.topology.graph = graph;
  return c;
}

CommPlan plan(const ExperimentConfig& c, std::int64_t steps = 100) {
  return comm_plan({c, kFloats, steps});
}

TEST_CASE("every registered algorithm states its plan", "[optimizers][cost]") {
  for (const AlgorithmInfo* info : algorithms()) {
    CAPTURE(info->name);
    CHECK(info->plan != nullptr);
  }
  CHECK(plan(config("none", 4)).parts.empty());
  CHECK(plan(config("dpsgd", 1)).parts.empty());  // one peer sends nothing
}

TEST_CASE("the allreduce plans count the direct, ring and halving-doubling phases",
          "[optimizers][cost]") {
  // 4 ranks, segments of one piece: direct, 2 phases of 3 messages of a quarter each; a rank
  // sends 2 (N-1)/N of the vector.
  CommPlan p = plan(config("allreduce", 4));
  REQUIRE(p.parts.size() == 1);
  CHECK(p.parts[0].phases == 2);
  CHECK(p.parts[0].message_bytes == kBytes / 4);
  CHECK(p.parts[0].bytes_per_phase == 3 * kBytes / 4);
  CHECK(p.bytes_per_step() == Approx(2.0 * 3 / 4 * kBytes));
  // 8 ranks: the ring, 2(N-1) = 14 phases of an eighth each.
  p = plan(config("allreduce", 8));
  REQUIRE(p.parts.size() == 1);
  CHECK(p.parts[0].phases == 14);
  CHECK(p.parts[0].message_bytes == kBytes / 8);
  CHECK(p.parts[0].bytes_per_phase == kBytes / 8);
  CHECK(p.bytes_per_step() == Approx(2.0 * 7 / 8 * kBytes));
  // Every H = 4 steps, with a bf16 wire: a quarter of the steps, half the bytes, and the
  // 16-bit ring (HalfRingAllreduce) whatever the size: 6 phases.
  ExperimentConfig c = config("allreduce", 4);
  c.algorithm.local_steps = 4;
  c.algorithm.wire.format = "bf16";
  CHECK(plan(c).parts[0].phases == 6);
  CHECK(plan(c).bytes_per_step() == Approx(2.0 * 3 / 4 * kBytes / 2 / 4));
  // 4 ranks whose segments are two pieces: the ring, which pipelines them.
  c = config("allreduce", 4);
  c.transport.chunk_bytes = 500;
  CHECK(plan(c).parts[0].phases == 6);
  CHECK(plan(c).parts[0].chunks == 2);
  // Pieces of chunk_bytes: a segment above it travels in messages of that size.
  c = config("allreduce", 2);
  c.transport.chunk_bytes = 1000;
  CHECK(plan(c).parts[0].message_bytes == 1000);
  CHECK(plan(c).parts[0].bytes_per_phase == kBytes / 2);
  CHECK(plan(c).parts[0].chunks == 2);
  // 20 ranks (above kRingMaxRanks = 16): 4 ranks fold in and out (2 phases of the vector), then
  // the 16 halve and double: sizes 1/2, 1/4, 1/8, 1/16 of it, twice each.
  p = plan(config("allreduce", 20));
  REQUIRE(p.parts.size() == 5);
  CHECK(p.parts[0].phases == 2);
  CHECK(p.parts[0].bytes_per_phase == kBytes);
  CHECK(p.parts[4].bytes_per_phase == kBytes / 16);
  CHECK(p.parts[4].per_step == 2);
  CHECK(p.bytes_per_step() == Approx(2 * kBytes + 2 * kBytes * (0.5 + 0.25 + 0.125 + 0.0625)));
}

TEST_CASE("gradient buckets, DGC and the local-SGD schedules", "[optimizers][cost]") {
  // Gradients in buckets of 1000 bytes with overlap: 4 direct allreduces, each 2 phases of
  // 3 messages of 250 bytes.
  ExperimentConfig c = config("allreduce", 4);
  c.algorithm.average = "gradients";
  c.algorithm.overlap = true;
  c.algorithm.bucket_mb = 1000.0 / (1 << 20);
  CommPlan p = plan(c);
  REQUIRE(p.parts.size() == 4);
  for (const CommPart& part : p.parts) {
    CHECK(part.phases == 2);
    CHECK(part.message_bytes == Approx(250));
    CHECK(part.bytes_per_phase == Approx(750));
  }
  CHECK(p.bytes_per_step() == Approx(2.0 * 3 / 4 * kBytes));
  // DGC at 1% without warm-up: 10 pairs each; 4 ranks double twice: 10 pairs, then 20
  // (disjoint), 8 bytes each behind a 16-byte header.
  c = config("allreduce", 4);
  c.algorithm.average = "gradients";
  c.algorithm.sparsify.name = "dgc";
  c.algorithm.sparsify.density = 0.01;
  c.algorithm.sparsify.warmup_steps = 0;
  c.train.optimizer.momentum = 0.9;
  p = plan(c);
  REQUIRE(p.parts.size() == 2);
  CHECK(p.parts[0].bytes_per_phase == 16 + 8 * 10);
  CHECK(p.parts[1].bytes_per_phase == 16 + 8 * 20);
  // local_sgd, H = 8, post-local from step 20 of 100: (20 + 80 / 8) / 100 of the steps.
  c = config("local_sgd", 4);
  c.algorithm.local_steps = 8;
  c.algorithm.switch_step = 20;
  CHECK(plan(c, 100).parts[0].per_step == Approx(0.3));
  c = config("diloco", 4);
  c.algorithm.local_steps = 16;
  CHECK(plan(c, 160).bytes_per_step() == Approx(2.0 * 3 / 4 * kBytes / 16));
  CHECK(plan(c, 100).bytes_per_step() == Approx(2.0 * 3 / 4 * kBytes * 6 / 100));  // 6 of 100 steps
}

TEST_CASE("the gossip plans send to each out-neighbor of the graph", "[optimizers][cost]") {
  // A ring of 4: 2 neighbors; a 3x3 torus: 4; the one-peer exponential graph: 1 a round; the
  // exponential graph of 8: 2^0, 2^1, 2^2 ahead, 3.
  CHECK(plan(config("dpsgd", 4, "ring")).bytes_per_step() == Approx(2 * kBytes));
  CHECK(plan(config("dpsgd", 9, "torus")).bytes_per_step() == Approx(4 * kBytes));
  CHECK(plan(config("dpsgd", 8, "one_peer_exponential")).bytes_per_step() == Approx(kBytes));
  CHECK(plan(config("dpsgd", 8, "exponential")).bytes_per_step() == Approx(3 * kBytes));
  const CommPart ring = plan(config("dpsgd", 4)).parts.at(0);
  CHECK(ring.phases == 1);
  CHECK(ring.message_bytes == kBytes);
  // A 16-bit wire halves each message.
  ExperimentConfig c = config("dpsgd", 4);
  c.algorithm.wire.format = "fp16";
  CHECK(plan(c).bytes_per_step() == Approx(kBytes));
  // SGP pushes the weight w as one more float.
  CHECK(plan(config("sgp", 8, "one_peer_exponential")).bytes_per_step() == Approx(kBytes + 4));
  // CHOCO's top-10%: a 4-byte count and 100 (index, value) pairs to each of 2 neighbors.
  c = config("choco", 4);
  c.algorithm.compressor.name = "topk";
  c.algorithm.compressor.ratio = 0.1;
  CHECK(plan(c).bytes_per_step() == Approx(2 * (4 + 8 * 100)));
  // EASGD every H = 4 steps, the pairwise exchange and AD-PSGD: one model each round.
  c = config("easgd", 4);
  c.algorithm.local_steps = 4;
  CHECK(plan(c).bytes_per_step() == Approx(2 * kBytes / 4));
  CHECK(plan(config("pairwise", 4)).bytes_per_step() == Approx(kBytes));
  CHECK(plan(config("adpsgd", 4)).bytes_per_step() == Approx(kBytes));
  CHECK_FALSE(plan(config("adpsgd", 4)).note.empty());
}

}  // namespace
}  // namespace murmur::optimizers
