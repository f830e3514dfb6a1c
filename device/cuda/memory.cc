#include "device/cuda/memory.h"

#include <fmt/format.h>

#include "core/error.h"
#include "device/cuda/check.h"

namespace murmur::device::cuda {

int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error so later calls start clean
    return 0;
  }
  return count;
}

std::string device_name(int index) {
  cudaDeviceProp prop{};
  MURMUR_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return fmt::format("{} (sm_{}{}, {} GiB)", prop.name, prop.major, prop.minor,
                     prop.totalGlobalMem >> 30);
}

int device_for_local_rank(int local_rank) {
  const int count = device_count();
  if (count == 0) throw CudaError("run.device: cuda, but no CUDA device is visible to this process");
  return (local_rank < 0 ? 0 : local_rank) % count;
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  MURMUR_CUDA_CHECK(cudaMalloc(&data_, bytes));
  MURMUR_CUDA_CHECK(cudaMemset(data_, 0, bytes));
  // cudaMemset is queued on the legacy default stream, which our non-blocking streams do not
  // wait for: finish it here, or a copy queued next on another stream could be zeroed after.
  MURMUR_CUDA_CHECK(cudaDeviceSynchronize());
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

PinnedBuffer::PinnedBuffer(std::size_t bytes) : size_(bytes) {
  if (bytes > 0) MURMUR_CUDA_CHECK(cudaMallocHost(&data_, bytes));
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) cudaFreeHost(data_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) cudaFreeHost(data_);
}

HostRegistration::HostRegistration(std::span<std::byte> bytes) noexcept {
  if (bytes.empty()) return;
  if (cudaHostRegister(bytes.data(), bytes.size(), cudaHostRegisterDefault) == cudaSuccess) {
    data_ = bytes.data();
  } else {
    cudaGetLastError();  // not sticky, but clear it so the next check does not report it
  }
}

HostRegistration& HostRegistration::operator=(HostRegistration&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) cudaHostUnregister(data_);
    data_ = std::exchange(o.data_, nullptr);
  }
  return *this;
}

HostRegistration::~HostRegistration() {
  if (data_ != nullptr) cudaHostUnregister(data_);
}

Stream::Stream() { MURMUR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    stream_ = std::exchange(o.stream_, nullptr);
  }
  return *this;
}

Stream::~Stream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void Stream::synchronize() const { MURMUR_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

Event::Event() { MURMUR_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (event_ != nullptr) cudaEventDestroy(event_);
    event_ = std::exchange(o.event_, nullptr);
  }
  return *this;
}

Event::~Event() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

void Event::record(cudaStream_t stream) { MURMUR_CUDA_CHECK(cudaEventRecord(event_, stream)); }

void Event::synchronize() const { MURMUR_CUDA_CHECK(cudaEventSynchronize(event_)); }

}  // namespace murmur::device::cuda
