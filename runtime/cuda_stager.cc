#include "runtime/cuda_stager.h"

#ifdef MURMUR_WITH_CUDA

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "nn/cuda/check.h"
#include "nn/cuda/updates.h"

namespace murmur::runtime {

CudaStager::CudaStager(transport::Transport& transport, float* params, std::size_t floats,
                       cudaStream_t compute, std::size_t chunk_bytes, bool allow_direct)
    : ChunkStager(ChunkLayout(floats, chunk_bytes)),
      transport_(transport),
      params_(params),
      compute_(compute),
      direct_(allow_direct && transport.supports_device_memory()),
      stride_(std::max<std::size_t>(64, (floats + 63) / 64 * 64)) {
  downloaded_.resize(layout().count());
  const std::size_t bytes = floats * sizeof(float);
  if (direct_) {
    out_device_ = nn::cuda::DeviceBuffer(bytes);
    out_region_ = transport_.register_device_region(
        {static_cast<std::byte*>(out_device_.data()), bytes});
  } else {
    out_host_ = nn::cuda::PinnedBuffer(bytes);
    out_region_ = transport_.register_region({static_cast<std::byte*>(out_host_.data()), bytes});
  }
  reserve(1);
}

CudaStager::~CudaStager() {
  // Nothing of ours may still be queued when the buffers go (a round that threw finished
  // already; this is the best effort for anything else).
  cudaStreamSynchronize(copy_.get());
  cudaStreamSynchronize(compute_);
}

void CudaStager::reserve(std::size_t neighbors) {
  if (neighbors <= slots_) return;
  // The old slots may still feed a queued upload or mix: wait before freeing them.
  MURMUR_CUDA_CHECK(cudaStreamSynchronize(compute_));
  in_region_.reset();
  const std::size_t bytes = neighbors * stride_ * sizeof(float);
  in_device_ = nn::cuda::DeviceBuffer(bytes);  // direct: the slots; staged: upload scratch
  if (direct_) {
    in_region_ = transport_.register_device_region(
        {static_cast<std::byte*>(in_device_.data()), bytes});
  } else {
    in_host_ = nn::cuda::PinnedBuffer(bytes);
    in_region_ = transport_.register_region({static_cast<std::byte*>(in_host_.data()), bytes});
  }
  slots_ = neighbors;
}

transport::ByteRange CudaStager::in_range(std::size_t j, std::size_t k) const {
  const transport::ByteRange chunk = layout().bytes(k);
  return {j * stride_ * sizeof(float) + chunk.offset, chunk.size};
}

void CudaStager::start_download(std::size_t k) {
  if (k == 0) {
    // The snapshot must see the last local step: the copy stream waits for the compute stream.
    ready_.record(compute_);
    MURMUR_CUDA_CHECK(cudaStreamWaitEvent(copy_.get(), ready_.get(), 0));
  }
  const std::size_t first = layout().first(k), n = layout().size(k);
  void* to = direct_ ? out_device_.floats() + first
                     : static_cast<float*>(out_host_.data()) + first;
  MURMUR_CUDA_CHECK(cudaMemcpyAsync(to, params_ + first, n * sizeof(float),
                                    direct_ ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost,
                                    copy_.get()));
  downloaded_[k].record(copy_.get());
}

void CudaStager::wait_download(std::size_t k) { downloaded_[k].synchronize(); }

void CudaStager::upload_and_mix(std::size_t k, std::span<const std::size_t> neighbors, float self,
                                std::span<const float> weights) {
  const std::size_t first = layout().first(k), n = layout().size(k);
  inputs_.clear();
  for (std::size_t j : neighbors) {
    float* slot = in_device_.floats() + j * stride_ + first;
    if (!direct_) {
      const float* host = static_cast<const float*>(in_host_.data()) + j * stride_ + first;
      MURMUR_CUDA_CHECK(cudaMemcpyAsync(slot, host, n * sizeof(float), cudaMemcpyHostToDevice,
                                        compute_));
    }
    inputs_.push_back(slot);
  }
  // The mix overwrites chunk k of the arena: only after its snapshot was taken (the caller
  // waited for it on the host; this orders it on the device too).
  MURMUR_CUDA_CHECK(cudaStreamWaitEvent(compute_, downloaded_[k].get(), 0));
  nn::cuda::mix(params_ + first, static_cast<std::int64_t>(n), self, inputs_, weights, compute_);
}

void CudaStager::finish() {
  copy_.synchronize();
  MURMUR_CUDA_CHECK(cudaStreamSynchronize(compute_));
}

std::string CudaStager::describe() const {
  return direct_ ? "device memory (UCX CUDA)" : "pipelined pinned chunks";
}

std::span<const float> CudaStager::host_snapshot() const {
  if (direct_) throw Error("cuda stager: host_snapshot() in direct mode");
  return {static_cast<const float*>(out_host_.data()), layout().floats};
}

std::span<float> CudaStager::host_slot(std::size_t j) {
  if (direct_ || j >= slots_) throw Error(fmt::format("cuda stager: no host slot {}", j));
  return {static_cast<float*>(in_host_.data()) + j * stride_, layout().floats};
}

}  // namespace murmur::runtime

#endif  // MURMUR_WITH_CUDA
