#include "optimizers/adpsgd_wire.h"

#include <algorithm>
#include <cstring>
#include <deque>

#include <fmt/format.h>

#include "core/crc32c.h"

namespace murmur::optimizers::adpsgd_wire {
namespace {

template <class T>
void put(std::span<std::byte> out, std::size_t at, T v) {
  std::memcpy(out.data() + at, &v, sizeof v);
}

template <class T>
T get(std::span<const std::byte> in, std::size_t at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof v);
  return v;
}

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
  put<std::uint32_t>(out, 0, kMagic);
  put<std::uint16_t>(out, 4, static_cast<std::uint16_t>(h.kind));
  put<std::uint16_t>(out, 6, 0);
  put<std::int32_t>(out, 8, h.rank);
  put<std::uint32_t>(out, 12, h.crc);
  put<std::uint64_t>(out, 16, h.sequence);
  put<std::int64_t>(out, 24, h.step);
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
  if (get<std::uint32_t>(message, 0) != kMagic) {
    why = fmt::format("a message from rank {} without adpsgd's magic (0x{:08x})", expect.from,
                      get<std::uint32_t>(message, 0));
    return std::nullopt;
  }
  Header h;
  const auto kind = get<std::uint16_t>(message, 4);
  h.kind = static_cast<Kind>(kind);
  h.rank = get<std::int32_t>(message, 8);
  h.crc = get<std::uint32_t>(message, 12);
  h.sequence = get<std::uint64_t>(message, 16);
  h.step = get<std::int64_t>(message, 24);
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

// The ranks reachable from rank 0 over edges between the two colours.
bool cross_connected(const std::vector<std::vector<int>>& adj, const std::vector<int>& colour) {
  const std::size_t n = adj.size();
  std::vector<bool> seen(n, false);
  std::deque<int> queue{0};
  seen[0] = true;
  std::size_t reached = 1;
  while (!queue.empty()) {
    const int i = queue.front();
    queue.pop_front();
    for (int j : adj[i]) {
      if (seen[j] || colour[j] == colour[i]) continue;
      seen[j] = true;
      ++reached;
      queue.push_back(j);
    }
  }
  return reached == n;
}

}  // namespace

Roles split_roles(const topology::Graph& g) {
  const int n = g.n;
  std::vector<std::vector<int>> adj(n);
  for (int i = 0; i < n; ++i) {
    for (int j : g.out[i]) {
      if (i == j) continue;
      adj[i].push_back(j);
      adj[j].push_back(i);
    }
  }
  for (auto& a : adj) {
    std::sort(a.begin(), a.end());
    a.erase(std::unique(a.begin(), a.end()), a.end());
  }
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
  if (!proper && n > 1) {
    // Not bipartite: even ranks against odd ones keeps half of each rank's neighbors on the
    // common graphs (complete, exponential, an odd ring), where the search's colouring could
    // leave one active against all the rest; unless it cuts the graph apart.
    std::vector<int> parity(n);
    for (int i = 0; i < n; ++i) parity[i] = i % 2;
    if (cross_connected(adj, parity)) colour = parity;
  }
  Roles r;
  r.active.resize(n);
  r.partners.resize(n);
  for (int i = 0; i < n; ++i) {
    r.active[i] = colour[i] == 0;
    for (int j : adj[i]) {
      if (colour[j] != colour[i]) {
        r.partners[i].push_back(j);
      } else if (i < j) {
        ++r.dropped_edges;
      }
    }
  }
  return r;
}

}  // namespace murmur::optimizers::adpsgd_wire
