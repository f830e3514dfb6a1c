#include "transport/checked_message.h"

#include <fmt/format.h>

#include "core/crc32c.h"
#include "core/error.h"
#include "transport/frame.h"
#include "transport/tag.h"

namespace murmur::transport {
namespace {

constexpr std::uint64_t kHeaderChunk = 0;
constexpr std::uint64_t kBodyChunk = 1;

// Waits for `request`; false (with the request cancelled) when the peer was silent or slow past
// `patience`.
bool wait_for(Transport& t, Request& request, const Patience& patience) {
  if (wait_heard(t, request, patience.silence, patience.timeout) == WaitEnd::kDone) return true;
  t.cancel(request);
  return false;
}

}  // namespace

std::vector<std::byte> encode_checked_header(const CheckedKind& kind, std::string_view body) {
  std::vector<std::byte> h(kCheckedHeaderBytes);
  store_le<std::uint32_t>(h.data(), kind.magic);
  store_le<std::uint16_t>(h.data() + 4, kind.version);
  store_le<std::uint16_t>(h.data() + 6, 0);
  store_le<std::uint64_t>(h.data() + 8, body.size());
  store_le<std::uint32_t>(h.data() + 16, crc32c(body));
  store_le<std::uint32_t>(h.data() + 20, 0);
  return h;
}

std::uint64_t decode_checked_header(const CheckedKind& kind, std::span<const std::byte> header,
                                    std::string_view from, std::uint32_t* crc) {
  if (header.size() != kCheckedHeaderBytes) {
    throw ProtocolError(fmt::format("{}: a {} header of {} bytes, expected {}", from, kind.what,
                                    header.size(), kCheckedHeaderBytes));
  }
  const auto magic = load_le<std::uint32_t>(header.data());
  if (magic != kind.magic) {
    throw ProtocolError(fmt::format("{}: a {} header with magic {:#010x}, expected {:#010x}", from,
                                    kind.what, magic, kind.magic));
  }
  const auto version = load_le<std::uint16_t>(header.data() + 4);
  if (version != kind.version) {
    throw ProtocolError(fmt::format("{}: {} format version {}, this murmur reads {}", from,
                                    kind.what, version, kind.version));
  }
  const auto length = load_le<std::uint64_t>(header.data() + 8);
  if (length == 0 || length > kind.max_bytes) {
    throw ProtocolError(fmt::format("{}: a {} of {} bytes, outside 1..{}", from, kind.what, length,
                                    kind.max_bytes));
  }
  *crc = load_le<std::uint32_t>(header.data() + 16);
  return length;
}

void check_body(const CheckedKind& kind, std::string_view body, std::uint32_t crc,
                std::string_view from) {
  if (const std::uint32_t got = crc32c(body); got != crc) {
    throw ProtocolError(fmt::format("{}: {} CRC32C {:#010x}, its header says {:#010x}", from,
                                    kind.what, got, crc));
  }
}

bool send_checked(Transport& t, int to, Tag tag, const CheckedKind& kind, std::string_view body,
                  const Patience& patience) {
  const TagLayout layout(t);
  std::vector<std::byte> header = encode_checked_header(kind, body);
  std::string copy(body);  // a region's bytes must be writable memory of ours
  const auto header_region = t.register_region(header);
  const auto body_region = t.register_region(std::as_writable_bytes(std::span(copy.data(), copy.size())));
  Request h = t.send(to, layout.with(tag, 0, kHeaderChunk), *header_region, {0, header.size()});
  Request b = t.send(to, layout.with(tag, 0, kBodyChunk), *body_region, {0, copy.size()});
  const bool header_left = wait_for(t, h, patience);
  if (!header_left) {
    t.cancel(b);
    return false;
  }
  return wait_for(t, b, patience);
}

struct CheckedReceive::State {
  Transport& t;
  int from;
  Tag tag;
  CheckedKind kind;
  std::vector<std::byte> header = std::vector<std::byte>(kCheckedHeaderBytes);
  std::unique_ptr<Region> region;
  Request request;
};

CheckedReceive::CheckedReceive(Transport& t, int from, Tag tag, const CheckedKind& kind)
    : state_(new State{t, from, tag, kind}) {
  const TagLayout layout(t);
  state_->region = t.register_region(state_->header);
  state_->request = t.recv(from, layout.with(tag, 0, kHeaderChunk), *state_->region,
                           {0, state_->header.size()});
}

CheckedReceive::~CheckedReceive() {
  // A header that never came: its receive must not outlive the buffer it writes into.
  if (state_ && state_->request.valid() && !state_->request.state()->done) {
    state_->t.cancel(state_->request);
  }
}

CheckedReceive::CheckedReceive(CheckedReceive&&) noexcept = default;

std::optional<std::string> CheckedReceive::finish(const Patience& patience) {
  State& s = *state_;
  const std::string who = fmt::format("rank {}", s.from);
  if (!wait_for(s.t, s.request, patience)) return std::nullopt;
  std::uint32_t crc = 0;
  const std::uint64_t length =
      decode_checked_header(s.kind, std::span(s.header).first(s.request.state()->bytes), who, &crc);
  std::string body(static_cast<std::size_t>(length), '\0');
  const auto region = s.t.register_region(std::as_writable_bytes(std::span(body.data(), body.size())));
  const TagLayout layout(s.t);
  Request r = s.t.recv(s.from, layout.with(s.tag, 0, kBodyChunk), *region, {0, body.size()});
  if (!wait_for(s.t, r, patience)) return std::nullopt;
  if (r.state()->bytes != body.size()) {
    throw ProtocolError(fmt::format("{}: a {} of {} bytes, its header says {}", who, s.kind.what,
                                    r.state()->bytes, body.size()));
  }
  check_body(s.kind, body, crc, who);
  return body;
}

}  // namespace murmur::transport
