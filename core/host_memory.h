// HostBuffer: an owned, zeroed, 256-byte aligned block of host memory (the storage of the
// parameter arena and of nn workspaces). 256 bytes covers AVX-512 loads, cache lines, and the
// alignment UCX/libfabric registration and cudaMemcpy like best. Move-only; not thread-safe
// (the owner decides who touches the bytes).
//
// A buffer of 2 MiB or more is aligned to 2 MiB and asks the kernel for transparent huge pages
// (madvise MADV_HUGEPAGE; Debian's default THP mode, "madvise", gives them only to memory that
// asks). The transports copy whole arenas: a shared-memory receive (UCX over CMA,
// process_vm_readv) walks the sender's pages one by one, and with 4 KiB pages it moved 16 MiB in
// 2.9 ms here against 1.0 ms with huge pages on both ends (docs/benchmarks.md, "Huge pages").
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <utility>

namespace murmur {

class HostBuffer {
 public:
  static constexpr std::size_t kAlignment = 256;
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;

  HostBuffer() = default;
  // Allocates `bytes` zeroed bytes (the allocation is rounded up to its alignment, also
  // zeroed). Throws std::bad_alloc when the memory is not there.
  explicit HostBuffer(std::size_t bytes) : size_(bytes) {
    if (bytes == 0) return;
    const std::size_t align = alignment_for(bytes);
    const std::size_t rounded = (bytes + align - 1) / align * align;
    data_ = static_cast<std::byte*>(std::aligned_alloc(align, rounded));
    if (data_ == nullptr) throw std::bad_alloc();
    // Before the first touch, so that the zeroing faults in huge pages. A kernel without THP
    // refuses (EINVAL): the buffer is then made of small pages, as it would be anyway.
    if (align == kHugePage) madvise(data_, rounded, MADV_HUGEPAGE);
    std::memset(data_, 0, rounded);
  }
  // The alignment (and rounding) of a buffer of `bytes`: a huge page from one huge page up.
  static constexpr std::size_t alignment_for(std::size_t bytes) {
    return bytes >= kHugePage ? kHugePage : kAlignment;
  }
  // A buffer of `count` zeroed floats.
  static HostBuffer floats(std::size_t count) { return HostBuffer(count * sizeof(float)); }

  HostBuffer(HostBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  HostBuffer& operator=(HostBuffer&& other) noexcept {
    if (this != &other) {
      std::free(data_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer() { std::free(data_); }

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  std::span<std::byte> bytes() { return {data_, size_}; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  // The buffer as floats (size() / sizeof(float) of them).
  std::span<float> as_floats() {
    return {reinterpret_cast<float*>(data_), size_ / sizeof(float)};
  }
  std::span<const float> as_floats() const {
    return {reinterpret_cast<const float*>(data_), size_ / sizeof(float)};
  }
  void zero() {
    if (data_ != nullptr) std::memset(data_, 0, size_);
  }

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace murmur
