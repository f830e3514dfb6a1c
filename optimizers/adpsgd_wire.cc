#include "optimizers/adpsgd_wire.h"

#include <deque>

#include <fmt/format.h>

#include "core/crc32c.h"
#include "transport/frame.h"

namespace murmur::optimizers::adpsgd_wire {
namespace {

using transport::load_le;
using transport::store_le;

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kRequest: return "request";
    case Kind::kReply: return "reply";
    case Kind::kBye: return "goodbye";
    case Kind::kRefused: return "refusal";
  }
  return "?";
}

}  // namespace

void write_header(std::span<std::byte> out, const Header& h) {
  std::byte* at = out.data();
  store_le<std::uint32_t>(at, kMagic);
  store_le<std::uint16_t>(at + 4, static_cast<std::uint16_t>(h.kind));
  store_le<std::uint16_t>(at + 6, 0);
  store_le<std::int32_t>(at + 8, h.rank);
  store_le<std::uint32_t>(at + 12, h.crc);
  store_le<std::uint64_t>(at + 16, h.sequence);
  store_le<std::int64_t>(at + 24, h.step);
}

void seal(std::span<std::byte> message, Header h, std::span<const float> model) {
  h.crc = crc32c(std::as_bytes(model));
  write_header(message, h);
}

std::optional<Header> check(std::span<const std::byte> message, std::size_t got,
                            const Expect& expect, std::string& why) {
  const std::size_t full = kHeaderBytes + expect.model_floats * sizeof(float);
  if (got < kHeaderBytes || got > message.size()) {
    why = fmt::format("a message of {} bytes from rank {}, shorter than its {}-byte header", got,
                      expect.from, kHeaderBytes);
    return std::nullopt;
  }
  const std::byte* at = message.data();
  if (const auto magic = load_le<std::uint32_t>(at); magic != kMagic) {
    why = fmt::format("a message from rank {} without adpsgd's magic (0x{:08x})", expect.from, magic);
    return std::nullopt;
  }
  Header h;
  const auto kind = load_le<std::uint16_t>(at + 4);
  h.kind = static_cast<Kind>(kind);
  h.rank = load_le<std::int32_t>(at + 8);
  h.crc = load_le<std::uint32_t>(at + 12);
  h.sequence = load_le<std::uint64_t>(at + 16);
  h.step = load_le<std::int64_t>(at + 24);
  const bool reply_kind = h.kind == Kind::kReply || h.kind == Kind::kRefused;
  const bool request_kind = h.kind == Kind::kRequest || h.kind == Kind::kBye;
  if ((expect.reply && !reply_kind) || (!expect.reply && !request_kind)) {
    why = fmt::format("a message of kind {} from rank {} where a {} was due", kind, expect.from,
                      expect.reply ? "reply" : "request");
    return std::nullopt;
  }
  if (h.rank != expect.from) {
    why = fmt::format("a {} from rank {} that says it is from rank {}", kind_name(h.kind),
                      expect.from, h.rank);
    return std::nullopt;
  }
  if (h.sequence != expect.sequence) {
    why = fmt::format("a {} from rank {} numbered {} where {} was due (a replay, or one long past)",
                      kind_name(h.kind), expect.from, h.sequence, expect.sequence);
    return std::nullopt;
  }
  const bool with_model = h.kind == Kind::kRequest || h.kind == Kind::kReply;
  if (got != (with_model ? full : kHeaderBytes)) {
    why = fmt::format("a {} of {} bytes from rank {} (expected {})", kind_name(h.kind), got,
                      expect.from, with_model ? full : kHeaderBytes);
    return std::nullopt;
  }
  if (with_model) {
    const std::uint32_t crc = crc32c(message.subspan(kHeaderBytes, full - kHeaderBytes));
    if (crc != h.crc) {
      why = fmt::format("a {} from rank {} whose model fails its CRC32C (0x{:08x}, header says "
                        "0x{:08x})", kind_name(h.kind), expect.from, crc, h.crc);
      return std::nullopt;
    }
  }
  return h;
}

namespace {

// The graph of the edges between the two colours.
topology::Graph across(const std::vector<std::vector<int>>& adj, const std::vector<int>& colour) {
  topology::Graph g{static_cast<int>(adj.size()), false, std::vector<std::vector<int>>(adj.size())};
  for (std::size_t i = 0; i < adj.size(); ++i) {
    for (int j : adj[i]) {
      if (colour[j] != colour[i]) g.out[i].push_back(j);
    }
  }
  return g;
}

}  // namespace

Roles split_roles(const topology::Graph& g) {
  const int n = g.n;
  const std::vector<std::vector<int>> adj = topology::undirected_neighbors(g);
  // Breadth-first 2-colouring: proper where the graph is bipartite.
  std::vector<int> colour(n, -1);
  bool proper = true;
  for (int start = 0; start < n; ++start) {
    if (colour[start] >= 0) continue;
    colour[start] = 0;
    std::deque<int> queue{start};
    while (!queue.empty()) {
      const int i = queue.front();
      queue.pop_front();
      for (int j : adj[i]) {
        if (colour[j] < 0) {
          colour[j] = 1 - colour[i];
          queue.push_back(j);
        } else if (colour[j] == colour[i]) {
          proper = false;
        }
      }
    }
  }
  if (!proper) {
    // Not bipartite: even ranks against odd ones keeps half of each rank's neighbors on the
    // common graphs (complete, exponential, an odd ring), where the search's colouring could
    // leave one active against all the rest; unless it cuts the graph apart.
    std::vector<int> parity(n);
    for (int i = 0; i < n; ++i) parity[i] = i % 2;
    if (topology::is_connected(across(adj, parity))) colour = parity;
  }
  Roles r;
  r.partners = across(adj, colour).out;
  std::size_t all = 0, kept = 0;
  for (int i = 0; i < n; ++i) {
    r.active.push_back(colour[i] == 0);
    all += adj[i].size();
    kept += r.partners[i].size();
  }
  r.dropped_edges = static_cast<int>((all - kept) / 2);
  return r;
}

}  // namespace murmur::optimizers::adpsgd_wire
