// The ring allreduce (collectives.h) with a 16-bit wire (algorithm.wire): every message carries
// fp16 or bf16, half the bytes of the fp32 ring, while every sum is taken in fp32 (Micikevicius
// et al. 2018's rule: store and move in 16 bits, accumulate in 32). The reduce-scatter narrows
// each partial sum as it leaves and widens what arrives into the caller's fp32 data; the rank
// that completes a segment's sum narrows it once, and that one 16-bit copy is what the
// allgather hands round, so every rank ends with the bitwise same floats, as the fp32 ring.
// Rounding is to nearest even, or stochastic (Gupta et al. 2015), unbiased over rounds.
// Host memory only. Every message's size is checked against the schedule before it is used;
// a wrong one is a ProtocolError naming the sender and the step. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/half.h"
#include "core/rng.h"
#include "transport/collectives.h"

namespace murmur::transport {

class HalfRingAllreduce {
 public:
  // `seed` drives stochastic rounding (this rank's stream of it).
  HalfRingAllreduce(Transport& transport, CollectiveOptions options, HalfFormat format,
                    bool stochastic, std::uint64_t seed = 0);

  // Replaces `data` on every rank of the world by the sum (or mean) over ranks, each element
  // rounded once to the 16-bit format at the end. All ranks call it with the same size and
  // base tag (transport/tag.h: steps and chunks numbered in its fields).
  void run(std::span<float> data, ReduceOp op, Tag tag);

 private:
  void reserve(std::size_t n, std::size_t scratch);

  Transport& transport_;
  CollectiveOptions options_;
  HalfFormat format_;
  bool stochastic_;
  Rng rng_;
  // The 16-bit image of the data (sent from, and the allgather's landing place) and the
  // reduce-scatter's double-buffered receive cells; each registered once, regrown on demand.
  // The regions are declared after the memory they name, so they are unregistered first.
  std::vector<std::uint16_t> wire_, scratch_;
  std::unique_ptr<Region> wire_region_, scratch_region_;
};

}  // namespace murmur::transport
