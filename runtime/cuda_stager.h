// CudaStager: the ChunkStager of parameters in a device arena (runtime/chunk_stager.h). Two
// modes, chosen at construction:
//  - staged (any transport): each chunk is copied device -> pinned host snapshot on a copy
//    stream with an event after it, sent from there; neighbors' chunks land in pinned host slots
//    and are copied host -> device scratch and mixed there, on the compute stream.
//  - direct (transport.supports_device_memory(): UCX with CUDA): the snapshot and the slots are
//    device memory registered with the transport, so nothing crosses to the host; a chunk's
//    "download" is a device-to-device copy into the snapshot (the arena is mixed in place while
//    its chunks may still be on the wire).
// Built only with MURMUR_WITH_CUDA. Not thread-safe; owned by the peer's DeviceTrainer.
#pragma once

#ifdef MURMUR_WITH_CUDA

#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "nn/cuda/device.h"
#include "runtime/chunk_stager.h"

namespace murmur::runtime {

class CudaStager final : public ChunkStager {
 public:
  // `params` is the device arena of `floats` floats; `compute` the stream that trains on it
  // (the round waits for it, and the next step is queued after the mix). Uses device memory
  // directly iff transport.supports_device_memory() and `allow_direct`. Throws CudaError,
  // TransportError.
  CudaStager(transport::Transport& transport, float* params, std::size_t floats,
             cudaStream_t compute, std::size_t chunk_bytes, bool allow_direct = true);
  ~CudaStager() override;

  bool direct() const { return direct_; }
  void reserve(std::size_t neighbors) override;
  const transport::Region& out_region() const override { return *out_region_; }
  transport::Region& in_region() override { return *in_region_; }
  transport::ByteRange in_range(std::size_t j, std::size_t k) const override;
  void start_download(std::size_t k) override;
  void wait_download(std::size_t k) override;
  void upload_and_mix(std::size_t k, std::span<const std::size_t> neighbors, float self,
                      std::span<const float> weights) override;
  void finish() override;
  std::string describe() const override;

  // Test hooks: the host bytes of the snapshot and slots (staged mode only).
  std::span<const float> host_snapshot() const;
  std::span<float> host_slot(std::size_t j);

 private:
  transport::Transport& transport_;
  float* params_;
  cudaStream_t compute_;
  bool direct_;
  std::size_t stride_;  // floats per slot, a multiple of 64 (256-byte aligned slots)
  std::size_t slots_ = 0;
  nn::cuda::Stream copy_;                    // downloads
  nn::cuda::Event ready_;                    // the compute stream when the round began
  std::vector<nn::cuda::Event> downloaded_;  // one per chunk, recorded on copy_
  // Staged: pinned host snapshot and slots, and device scratch for the uploaded slots.
  // Direct: the snapshot and the slots themselves, in device memory.
  nn::cuda::PinnedBuffer out_host_, in_host_;
  nn::cuda::DeviceBuffer out_device_, in_device_;
  std::unique_ptr<transport::Region> out_region_, in_region_;  // after what they register
  std::vector<const float*> inputs_;
};

}  // namespace murmur::runtime

#endif  // MURMUR_WITH_CUDA
