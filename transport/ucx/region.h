// A byte range registered with ucp_mem_map, so that UCX moves it without bounce buffers and
// peers can put() into it through the packed rkey that remote_key() returns. Created by
// ucx::Transport::register_region; must be destroyed before the Transport (it holds the context).
// Immutable after construction: any thread may read it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <ucp/api/ucp.h>

#include "transport/transport.h"

namespace murmur::transport::ucx {

class Region final : public transport::Region {
 public:
  // Maps `bytes` in `context` (an empty span registers nothing). `memory_type` says where the
  // bytes live (UCS_MEMORY_TYPE_CUDA for device memory); UNKNOWN lets UCX detect it.
  // Throws TransportError.
  Region(ucp_context_h context, std::span<std::byte> bytes,
         ucs_memory_type_t memory_type = UCS_MEMORY_TYPE_UNKNOWN);
  ~Region() override;

  // Layout: u64 base address, u64 size, then the bytes of ucp_rkey_pack.
  std::vector<std::byte> remote_key() const override { return remote_key_; }
  // The memory handle, for UCP_OP_ATTR_FIELD_MEMH; null for an empty region.
  ucp_mem_h memh() const { return memh_; }

 private:
  ucp_context_h context_;
  ucp_mem_h memh_ = nullptr;
  std::vector<std::byte> remote_key_;
};

// The parts of a remote_key() blob. Throws ProtocolError if the blob is malformed.
struct RemoteKeyView {
  std::uint64_t address = 0;
  std::uint64_t size = 0;
  std::span<const std::byte> packed;  // for ucp_ep_rkey_unpack
};
RemoteKeyView parse_remote_key(std::span<const std::byte> blob);

}  // namespace murmur::transport::ucx
