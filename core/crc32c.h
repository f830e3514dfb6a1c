// CRC32C (Castagnoli, polynomial 0x1EDC6F41 reflected), the checksum of transport frames and
// of safetensors data sections. Pure function, thread-safe. Uses ISA-L's crc32_iscsi where the
// build found it (libisal-dev: carry-less multiply folding, chosen for the CPU at run time), else
// the SSE4.2 crc32 instruction when the build targets it (-march=native on x86-64), else a
// slicing-by-8 table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace murmur {

// Returns the CRC32C of `bytes`. Incremental: pass the previous result as `seed`, so
// crc32c(b, crc32c(a)) == crc32c(a followed by b). crc32c("123456789") == 0xE3069283.
std::uint32_t crc32c(std::span<const std::byte> bytes, std::uint32_t seed = 0);

inline std::uint32_t crc32c(std::string_view text, std::uint32_t seed = 0) {
  return crc32c(std::as_bytes(std::span(text.data(), text.size())), seed);
}

// The table implementation, always built: the reference the hardware path is tested against.
std::uint32_t crc32c_portable(std::span<const std::byte> bytes, std::uint32_t seed = 0);

// True iff this build computes CRC32C with the hardware instruction (for murmur-bench output).
bool crc32c_is_hardware();

}  // namespace murmur
