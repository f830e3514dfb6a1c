// Owned CUDA resources, in the tiny-cuda-nn GPUMemory way: a device buffer (plain cudaMalloc,
// never managed memory), pinned host memory, a registration that pins memory the caller owns,
// a stream and an event. Each moves and never copies; destructors free best-effort and never
// throw. Not thread-safe: the owner serializes use (the stream orders the device work).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <utility>

#include <cuda_runtime_api.h>

namespace murmur::device::cuda {

// The number of CUDA devices, 0 where there is no driver, no device or the call fails (a test
// then skips). Never throws.
int device_count() noexcept;
// "NVIDIA H200 (sm_90, 139 GiB)" for device `index`. Throws CudaError.
std::string device_name(int index);
// The device a process of local rank `local_rank` trains on: local_rank % device_count().
// Throws CudaError if there is none.
int device_for_local_rank(int local_rank);

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // `bytes` of device memory on the current device, zeroed. Throws CudaError.
  explicit DeviceBuffer(std::size_t bytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const { return data_; }
  float* floats() const { return static_cast<float*>(data_); }
  template <class T>
  T* get() const { return static_cast<T*>(data_); }
  std::size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

// Page-locked host memory (cudaMallocHost): the staging buffer of asynchronous copies.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t bytes);  // throws CudaError
  PinnedBuffer(PinnedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer();

  void* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

// Pins memory the caller owns (cudaHostRegister) for as long as this object lives, so that
// copies to and from it are DMA at full bandwidth. `registered()` is false where the driver
// refused (the memory then still works, through the driver's own staging).
class HostRegistration {
 public:
  HostRegistration() = default;
  explicit HostRegistration(std::span<std::byte> bytes) noexcept;
  HostRegistration(HostRegistration&& o) noexcept : data_(std::exchange(o.data_, nullptr)) {}
  HostRegistration& operator=(HostRegistration&& o) noexcept;
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;
  ~HostRegistration();

  bool registered() const { return data_ != nullptr; }

 private:
  void* data_ = nullptr;
};

class Stream {
 public:
  Stream();  // a non-blocking stream on the current device; throws CudaError
  Stream(Stream&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)) {}
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  cudaStream_t get() const { return stream_; }
  // Blocks until every call queued so far finished. Throws CudaError (also for a fault of an
  // earlier kernel, which surfaces here).
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  Event();  // timing disabled (cheaper); throws CudaError
  Event(Event&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream);
  void synchronize() const;

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace murmur::device::cuda
