#include "runtime/result_gather.h"

#include <chrono>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "core/logging.h"
#include "transport/checked_message.h"
#include "transport/tag.h"

namespace murmur::runtime {

namespace {

const transport::CheckedKind kResult{kResultMagic, kResultVersion, kMaxResultBytes, "result"};

}  // namespace

std::vector<std::byte> encode_result_header(std::string_view text) {
  return transport::encode_checked_header(kResult, text);
}

std::uint64_t decode_result_header(std::span<const std::byte> header, std::string_view from,
                                   std::uint32_t* crc) {
  return transport::decode_checked_header(kResult, header, from, crc);
}

nlohmann::json decode_result(std::string_view text, std::uint32_t crc, int from) {
  transport::check_body(kResult, text, crc, fmt::format("rank {}", from));
  return parse_result(text, from);
}

nlohmann::json parse_result(std::string_view text, int from) {
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
  const transport::Patience patience{std::chrono::milliseconds(config.peer_timeout_ms),
                                     std::chrono::milliseconds(config.recv_timeout_ms)};
  const transport::Tag tag = transport::TagLayout(t).make(transport::purpose::kResults, 0);
  const int me = t.rank();
  const int gatherer = ranks.front();
  if (me != gatherer) {
    try {
      if (!transport::send_checked(t, gatherer, tag, kResult, mine.dump(), patience)) {
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
  std::vector<std::pair<int, transport::CheckedReceive>> pending;
  pending.reserve(ranks.size());
  for (const int r : ranks) {
    if (r == me) continue;
    try {
      pending.emplace_back(r, transport::CheckedReceive(t, r, tag, kResult));
    } catch (const TransportError& e) {
      log().warn("results: rank {}'s result is left out: {}", r, e.what());
    }
  }
  for (auto& [r, receive] : pending) {
    try {
      const std::optional<std::string> text = receive.finish(patience);
      if (!text) {
        log().warn("results: rank {} sent none (silent past transport.peer_timeout_ms, or none "
                   "within transport.recv_timeout_ms); its result.json stays where it ran", r);
        continue;
      }
      out[r] = parse_result(*text, r);
    } catch (const TransportError& e) {
      log().warn("results: rank {}'s result is left out: {}", r, e.what());
    }
  }
  return out;
}

}  // namespace murmur::runtime
