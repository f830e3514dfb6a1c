// ChunkStager: the copy-and-mix side of a pipelined gossip round (runtime/device_gossip.h),
// behind a small interface so that the round's chunking, tagging, ordering and error handling
// are the same code, and tested on the CPU, whatever memory the parameters live in. A stager
// owns an outgoing snapshot of the parameters and one receive slot per in-neighbor, both
// registered with the transport, and knows how to copy a chunk out (device -> host) and to mix
// received chunks back in. HostStager, here, is the plain host implementation (memcpy and
// optimizers::mix); runtime/cuda_stager.h is the CUDA one. Not thread-safe: the round's thread
// drives it.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "optimizers/comm_thread.h"
#include "transport/transport.h"

namespace murmur::runtime {

// A flat float array cut into chunks of `chunk_floats` (the last one shorter): chunk k is the
// floats [k * chunk_floats, min(floats, (k + 1) * chunk_floats)).
struct ChunkLayout {
  // chunk_bytes is rounded down to whole floats (at least one). Throws ConfigError if that
  // makes more chunks than a tag can number (optimizers::kMaxChunks).
  ChunkLayout(std::size_t floats, std::size_t chunk_bytes);
  std::size_t floats = 0;
  std::size_t chunk_floats = 1;
  std::size_t count() const { return floats == 0 ? 0 : (floats + chunk_floats - 1) / chunk_floats; }
  std::size_t first(std::size_t k) const { return k * chunk_floats; }
  std::size_t size(std::size_t k) const;  // floats in chunk k
  // Chunk k's bytes inside a buffer that holds the whole array.
  transport::ByteRange bytes(std::size_t k) const {
    return {first(k) * sizeof(float), size(k) * sizeof(float)};
  }
};

class ChunkStager {
 public:
  virtual ~ChunkStager() = default;
  const ChunkLayout& layout() const { return layout_; }

  // Makes receive slots for `neighbors` in-neighbors; grows (re-registering) only when a round
  // has more than any before. Must not be called while a receive into the slots is pending.
  virtual void reserve(std::size_t neighbors) = 0;
  // Sends take chunk k from out_region() at layout().bytes(k), once wait_download(k) returned.
  virtual const transport::Region& out_region() const = 0;
  // In-neighbor j's chunk k lands in in_region() at in_range(j, k).
  virtual transport::Region& in_region() = 0;
  virtual transport::ByteRange in_range(std::size_t j, std::size_t k) const = 0;

  // Queues the copy of the parameters' chunk k into the outgoing snapshot. A round calls it
  // for chunks 0, 1, ... in order before any other call of the round.
  virtual void start_download(std::size_t k) = 0;
  // Blocks until chunk k of the snapshot is complete (sendable).
  virtual void wait_download(std::size_t k) = 0;
  // Queues x_k <- self * x_k + sum_i weights[i] * slot(neighbors[i])_k on the parameters' chunk
  // k (after copying those slots' chunk k to where the parameters live), with the arithmetic
  // of optimizers::mix. Call after wait_download(k) and once the chunk has arrived in every
  // listed slot. Need not wait for the copy or the mix to finish.
  virtual void upload_and_mix(std::size_t k, std::span<const std::size_t> neighbors, float self,
                              std::span<const float> weights) = 0;
  // Blocks until every queued copy and mix is done. Throws (CudaError) if the device failed.
  virtual void finish() = 0;
  // How the parameters move, for the peer's log: "pipelined pinned chunks", ...
  virtual std::string describe() const = 0;

 protected:
  explicit ChunkStager(ChunkLayout layout) : layout_(layout) {}

 private:
  ChunkLayout layout_;
};

// Parameters in host memory: the snapshot is a memcpy, the mix optimizers::mix on the chunk,
// straight from the receive slots. The CPU build's stager and the reference of the tests.
class HostStager final : public ChunkStager {
 public:
  // `params` (and `transport`) must outlive the stager.
  HostStager(transport::Transport& transport, std::span<float> params, std::size_t chunk_bytes);

  void reserve(std::size_t neighbors) override { slots_.reserve(neighbors); }
  const transport::Region& out_region() const override { return *out_region_; }
  transport::Region& in_region() override { return slots_.region(); }
  transport::ByteRange in_range(std::size_t j, std::size_t k) const override;
  void start_download(std::size_t k) override;
  void wait_download(std::size_t) override {}  // the memcpy is done when start_download returns
  void upload_and_mix(std::size_t k, std::span<const std::size_t> neighbors, float self,
                      std::span<const float> weights) override;
  void finish() override {}
  std::string describe() const override { return "host chunks"; }

 private:
  std::span<float> params_;
  std::vector<float> out_;
  std::unique_ptr<transport::Region> out_region_;
  optimizers::RecvSlots slots_;
  std::vector<const float*> inputs_;
};

}  // namespace murmur::runtime
