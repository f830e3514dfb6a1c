#include "runtime/result_gather.h"

#include <chrono>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "core/crc32c.h"
#include "core/error.h"
#include "core/logging.h"
#include "transport/frame.h"
#include "transport/tag.h"

namespace murmur::runtime {

namespace {

using transport::load_le;
using transport::store_le;

constexpr std::uint64_t kHeaderChunk = 0;
constexpr std::uint64_t kTextChunk = 1;

struct Timeouts {
  std::chrono::milliseconds silence, timeout;
};

// Waits for `request` from or to `peer`; false (with the request cancelled) when the peer is
// silent or slow past the timeouts.
bool wait_for(transport::Transport& t, transport::Request& request, const Timeouts& w) {
  if (transport::wait_heard(t, request, w.silence, w.timeout) == transport::WaitEnd::kDone) return true;
  t.cancel(request);
  return false;
}

// The result of `from`, or nullopt (with a warning) when it does not come or is malformed.
std::optional<nlohmann::json> receive_one(transport::Transport& t, const transport::TagLayout& layout,
                                          int from, std::vector<std::byte>& header,
                                          transport::Request& header_request, const Timeouts& w) {
  const std::string who = fmt::format("rank {}", from);
  try {
    if (!wait_for(t, header_request, w)) {
      log().warn("results: {} sent none (silent past transport.peer_timeout_ms, or none within "
                 "transport.recv_timeout_ms); its result.json stays where it ran", who);
      return std::nullopt;
    }
    std::uint32_t crc = 0;
    const std::uint64_t length =
        decode_result_header(std::span(header).first(header_request.state()->bytes), who, &crc);
    std::string text(static_cast<std::size_t>(length), '\0');
    const auto region = t.register_region(std::as_writable_bytes(std::span(text.data(), text.size())));
    transport::Request r = t.recv(from, layout.make(transport::purpose::kResults, 0, 0, kTextChunk),
                                  *region, {0, text.size()});
    if (!wait_for(t, r, w)) {
      log().warn("results: {} sent a header but not its result", who);
      return std::nullopt;
    }
    if (r.state()->bytes != text.size()) {
      throw ProtocolError(fmt::format("{}: a result of {} bytes, its header says {}", who,
                                      r.state()->bytes, text.size()));
    }
    return decode_result(text, crc, from);
  } catch (const TransportError& e) {
    log().warn("results: {}'s result is left out: {}", who, e.what());
    return std::nullopt;
  }
}

}  // namespace

std::vector<std::byte> encode_result_header(std::string_view text) {
  std::vector<std::byte> h(kResultHeaderBytes);
  store_le<std::uint32_t>(h.data(), kResultMagic);
  store_le<std::uint16_t>(h.data() + 4, kResultVersion);
  store_le<std::uint16_t>(h.data() + 6, 0);
  store_le<std::uint64_t>(h.data() + 8, text.size());
  store_le<std::uint32_t>(h.data() + 16, crc32c(text));
  store_le<std::uint32_t>(h.data() + 20, 0);
  return h;
}

std::uint64_t decode_result_header(std::span<const std::byte> header, std::string_view from,
                                   std::uint32_t* crc) {
  if (header.size() != kResultHeaderBytes) {
    throw ProtocolError(fmt::format("{}: a result header of {} bytes, expected {}", from,
                                    header.size(), kResultHeaderBytes));
  }
  const auto magic = load_le<std::uint32_t>(header.data());
  if (magic != kResultMagic) {
    throw ProtocolError(fmt::format("{}: a result header with magic {:#010x}, expected {:#010x}", from,
                                    magic, kResultMagic));
  }
  const auto version = load_le<std::uint16_t>(header.data() + 4);
  if (version != kResultVersion) {
    throw ProtocolError(fmt::format("{}: result format version {}, this murmur reads {}", from,
                                    version, kResultVersion));
  }
  const auto length = load_le<std::uint64_t>(header.data() + 8);
  if (length == 0 || length > kMaxResultBytes) {
    throw ProtocolError(fmt::format("{}: a result of {} bytes, outside 1..{}", from, length,
                                    kMaxResultBytes));
  }
  *crc = load_le<std::uint32_t>(header.data() + 16);
  return length;
}

nlohmann::json decode_result(std::string_view text, std::uint32_t crc, int from) {
  if (const std::uint32_t got = crc32c(text); got != crc) {
    throw ProtocolError(fmt::format("rank {}: result CRC32C {:#010x}, its header says {:#010x}", from,
                                    got, crc));
  }
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw ProtocolError(fmt::format("rank {}: its result is not a JSON object", from));
  const auto rank = j.find("rank");
  if (rank == j.end() || !rank->is_number_integer() || *rank != from) {
    throw ProtocolError(fmt::format("rank {}: its result names rank {}", from,
                                    rank == j.end() ? "none" : rank->dump()));
  }
  return j;
}

std::map<int, nlohmann::json> gather_results(transport::Transport& t, const TransportConfig& config,
                                             const std::vector<int>& ranks, const nlohmann::json& mine) {
  std::map<int, nlohmann::json> out;
  if (ranks.empty()) return out;
  const Timeouts w{std::chrono::milliseconds(config.peer_timeout_ms),
                   std::chrono::milliseconds(config.recv_timeout_ms)};
  const transport::TagLayout layout(t);
  const int me = t.rank();
  const int gatherer = ranks.front();
  if (me != gatherer) {
    const std::string text = mine.dump();
    std::vector<std::byte> header = encode_result_header(text);
    std::string body = text;  // the region's bytes must be writable memory of ours
    const auto header_region = t.register_region(header);
    const auto body_region = t.register_region(std::as_writable_bytes(std::span(body.data(), body.size())));
    try {
      transport::Request h = t.send(gatherer, layout.make(transport::purpose::kResults, 0, 0, kHeaderChunk),
                                    *header_region, {0, header.size()});
      transport::Request b = t.send(gatherer, layout.make(transport::purpose::kResults, 0, 0, kTextChunk),
                                    *body_region, {0, body.size()});
      if (!wait_for(t, h, w) || !wait_for(t, b, w)) {
        log().warn("results: rank {} did not take this rank's result; it stays here only", gatherer);
      }
    } catch (const TransportError& e) {
      log().warn("results: cannot send this rank's result to rank {}: {}; it stays here only",
                 gatherer, e.what());
    }
    return out;
  }
  out[me] = mine;
  // Every header receive is posted first, so that no sender waits on another's turn.
  struct Pending {
    int rank;
    std::vector<std::byte> header;
    std::unique_ptr<transport::Region> region;
    transport::Request request;
  };
  std::vector<Pending> pending;
  pending.reserve(ranks.size());
  for (const int r : ranks) {
    if (r == me) continue;
    Pending& p = pending.emplace_back();
    p.rank = r;
    p.header.resize(kResultHeaderBytes);
    p.region = t.register_region(p.header);
    try {
      p.request = t.recv(r, layout.make(transport::purpose::kResults, 0, 0, kHeaderChunk), *p.region,
                         {0, p.header.size()});
    } catch (const TransportError& e) {
      log().warn("results: rank {}'s result is left out: {}", r, e.what());
      pending.pop_back();
    }
  }
  for (Pending& p : pending) {
    if (auto result = receive_one(t, layout, p.rank, p.header, p.request, w)) {
      out[p.rank] = std::move(*result);
    }
  }
  return out;
}

}  // namespace murmur::runtime
