#include "transport/ucx/region.h"

#include <cstring>

#include "core/error.h"
#include "transport/ucx/check.h"

namespace murmur::transport::ucx {
namespace {

constexpr std::size_t kHeader = 2 * sizeof(std::uint64_t);

}  // namespace

Region::Region(ucp_context_h context, std::span<std::byte> bytes, ucs_memory_type_t memory_type)
    : transport::Region(bytes), context_(context) {
  if (bytes.empty()) return;
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  params.address = bytes.data();
  params.length = bytes.size();
  if (memory_type != UCS_MEMORY_TYPE_UNKNOWN) {
    // Device memory: the memh then carries its type, and sends and receives that pass it
    // (UCP_OP_ATTR_FIELD_MEMH) take UCX's CUDA path without detecting the type per call.
    params.field_mask |= UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    params.memory_type = memory_type;
  }
  MURMUR_UCS_CHECK(ucp_mem_map(context_, &params, &memh_));

  void* packed = nullptr;
  std::size_t packed_size = 0;
  ucs_status_t status = ucp_rkey_pack(context_, memh_, &packed, &packed_size);
  if (status != UCS_OK) {
    ucp_mem_unmap(context_, memh_);
    throw_ucs(status, "ucp_rkey_pack(context_, memh_, &packed, &packed_size)", __FILE__,
              __LINE__);
  }
  RkeyBuffer owned(packed);
  remote_key_.resize(kHeader + packed_size);
  const std::uint64_t header[2] = {reinterpret_cast<std::uintptr_t>(bytes.data()), bytes.size()};
  std::memcpy(remote_key_.data(), header, kHeader);
  std::memcpy(remote_key_.data() + kHeader, packed, packed_size);
}

Region::~Region() {
  if (memh_ != nullptr) ucp_mem_unmap(context_, memh_);
}

RemoteKeyView parse_remote_key(std::span<const std::byte> blob) {
  if (blob.size() <= kHeader) {
    throw ProtocolError("ucx: remote key of " + std::to_string(blob.size()) +
                        " bytes is too short (empty region, or not a ucx key)");
  }
  std::uint64_t header[2];
  std::memcpy(header, blob.data(), kHeader);
  return {header[0], header[1], blob.subspan(kHeader)};
}

}  // namespace murmur::transport::ucx
