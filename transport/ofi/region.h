// A byte range registered with fi_mr_reg in one domain, so that libfabric moves it without
// bounce buffers (FI_MR_LOCAL providers need its descriptor) and peers can fi_write into it with
// the key that remote_key() returns. Created by ofi::Transport::register_region; must be
// destroyed before the Transport. Immutable after construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "transport/ofi/check.h"
#include "transport/transport.h"

namespace murmur::transport::ofi {

class Region final : public transport::Region {
 public:
  // Registers `bytes` (nothing for an empty span). `requested_key` is used where the provider
  // lets the caller choose keys (no FI_MR_PROV_KEY); `endpoint` is bound for FI_MR_ENDPOINT.
  // Throws TransportError.
  Region(fid_domain* domain, fid_ep* endpoint, std::uint64_t mr_mode, std::uint64_t requested_key,
         std::span<std::byte> bytes);

  // Layout: u64 target address (virtual, or 0 without FI_MR_VIRT_ADDR), u64 size, u64 key.
  std::vector<std::byte> remote_key() const override;
  // The descriptor for local operations (null for an empty region).
  void* desc() const { return mr_ ? fi_mr_desc(mr_.get()) : nullptr; }

 private:
  MemoryRegion mr_;
  std::uint64_t address_ = 0;
  std::uint64_t key_ = 0;
};

struct RemoteKeyView {
  std::uint64_t address = 0;
  std::uint64_t size = 0;
  std::uint64_t key = 0;
};
// Throws ProtocolError if `blob` is not a remote_key() of this backend.
RemoteKeyView parse_remote_key(std::span<const std::byte> blob);

}  // namespace murmur::transport::ofi
