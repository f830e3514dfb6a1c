#include "transport/ofi/region.h"

#include <cstring>

#include "core/error.h"

namespace murmur::transport::ofi {
namespace {

constexpr std::size_t kKeyBytes = 3 * sizeof(std::uint64_t);

}  // namespace

Region::Region(fid_domain* domain, fid_ep* endpoint, std::uint64_t mr_mode,
               std::uint64_t requested_key, std::span<std::byte> bytes)
    : transport::Region(bytes) {
  if (bytes.empty()) return;
  const std::uint64_t access =
      FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  fid_mr* mr = nullptr;
  MURMUR_FI_CHECK(fi_mr_reg(domain, bytes.data(), bytes.size(), access, 0, requested_key, 0, &mr,
                            nullptr));
  mr_.reset(mr);
  if (mr_mode & FI_MR_ENDPOINT) {
    MURMUR_FI_CHECK(fi_mr_bind(mr, &endpoint->fid, 0));
    MURMUR_FI_CHECK(fi_mr_enable(mr));
  }
  key_ = fi_mr_key(mr);
  if (key_ == FI_KEY_NOTAVAIL) throw TransportError("ofi: fi_mr_key: provider gave no key");
  // Without FI_MR_VIRT_ADDR the target address of a write is an offset into the region.
  address_ = (mr_mode & FI_MR_VIRT_ADDR) ? reinterpret_cast<std::uintptr_t>(bytes.data()) : 0;
}

std::vector<std::byte> Region::remote_key() const {
  if (!mr_) return {};
  std::vector<std::byte> blob(kKeyBytes);
  const std::uint64_t words[3] = {address_, bytes().size(), key_};
  std::memcpy(blob.data(), words, kKeyBytes);
  return blob;
}

RemoteKeyView parse_remote_key(std::span<const std::byte> blob) {
  if (blob.size() != kKeyBytes) {
    throw ProtocolError("ofi: remote key of " + std::to_string(blob.size()) + " bytes, want " +
                        std::to_string(kKeyBytes) + " (empty region, or not an ofi key)");
  }
  std::uint64_t words[3];
  std::memcpy(words, blob.data(), kKeyBytes);
  return {words[0], words[1], words[2]};
}

}  // namespace murmur::transport::ofi
