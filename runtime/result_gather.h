// The end of a run without a shared filesystem: every peer of the final average sends its
// result.json (with its eval points) to the lowest of them over the run's own transport, and
// that one writes the whole run's results where it runs. One message from each peer is the only
// coordination: no directory is read or written by anyone but the gatherer.
//
// On the wire (tag purpose kResults): one checked message (transport/checked_message.h) of
// JSON text. The gatherer checks the header's magic, version and length (<= kMaxResultBytes)
// before it allocates anything, and the text's CRC32C and JSON (an object for the sending rank)
// before it keeps it. Not thread-safe (the transport's one thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "transport/transport.h"

namespace murmur::runtime {

inline constexpr std::uint32_t kResultMagic = 0x524d524d;  // "MRMR"
inline constexpr std::uint16_t kResultVersion = 1;
inline constexpr std::size_t kResultHeaderBytes = 24;
// A result.json is a few kilobytes (its eval points: one per evaluation); more is not a result.
inline constexpr std::uint64_t kMaxResultBytes = std::uint64_t{16} << 20;

// The header of a result message (transport/checked_message.h's, with the magic above).
std::vector<std::byte> encode_result_header(std::string_view text);
// The text's length, after checking magic, version and length. Throws ProtocolError naming
// `from` ("rank 2") and the field at fault.
std::uint64_t decode_result_header(std::span<const std::byte> header, std::string_view from,
                                   std::uint32_t* crc);
// The result of rank `from` in `text` (its CRC `crc`), checked: the CRC, JSON, an object whose
// "rank" is `from`. Throws ProtocolError naming the rank and what is wrong.
nlohmann::json decode_result(std::string_view text, std::uint32_t crc, int from);
// The same without the CRC (checked already): the JSON object of rank `from`'s result.
nlohmann::json parse_result(std::string_view text, int from);

// Every rank of `ranks` (the final average's, lowest first) calls it with its own result: the
// lowest returns every rank's result (its own too), by rank; the others send theirs to it and
// return an empty map. A rank whose result does not come (dead, silent for
// transport.peer_timeout_ms, or not within transport.recv_timeout_ms) or comes malformed is
// left out with a warning naming it: the run's other results are kept. Throws nothing for a
// peer's fault; a send the gatherer never takes is given up the same way.
std::map<int, nlohmann::json> gather_results(transport::Transport& transport,
                                             const TransportConfig& config,
                                             const std::vector<int>& ranks, const nlohmann::json& mine);

}  // namespace murmur::runtime
