// The messages of asynchronous AD-PSGD (adpsgd.h) and the split of its graph into active and
// passive peers. A message is a 32-byte header, then (requests and replies) the sender's model:
//   magic u32 "ADPS" | kind u16 | reserved u16 | sender rank i32 | CRC32C u32 of the model |
//   sequence u64 (the n-th request from this active to this passive) | sender's step i64
// little-endian, in one transfer under the tag (adpsgd's purpose, round = sequence mod 2^20,
// step 0 for a request or a goodbye, 1 for a reply or a refusal). A receiver checks the size,
// the header and the CRC before it uses a byte of the model (network input is untrusted).
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "topology/graph.h"

namespace murmur::optimizers::adpsgd_wire {

inline constexpr std::uint32_t kMagic = 0x53504441;  // "ADPS"
inline constexpr std::size_t kHeaderBytes = 32;
inline constexpr std::size_t kHeaderFloats = kHeaderBytes / sizeof(float);

enum class Kind : std::uint16_t {
  kRequest = 1,  // active -> passive: my model, average with it
  kReply = 2,    // passive -> active: my model as it was; I now hold the average
  kBye = 3,      // active -> passive: I am done, expect nothing more from me
  kRefused = 4,  // passive -> active: your request was malformed or out of order; nothing changed
};

struct Header {
  Kind kind = Kind::kRequest;
  int rank = -1;
  std::uint32_t crc = 0;
  std::uint64_t sequence = 0;
  std::int64_t step = 0;
};

// Writes `h` into the first kHeaderBytes of `out`.
void write_header(std::span<std::byte> out, const Header& h);
// Seals a message: the header with the CRC of `model` (empty for a goodbye or a refusal) into
// the first kHeaderBytes of `message`, whose model follows it.
void seal(std::span<std::byte> message, Header h, std::span<const float> model);

// What a receiver expects of a message before it trusts it.
struct Expect {
  int from = -1;                // the rank the transport says sent it
  std::uint64_t sequence = 0;   // the sequence number of its tag
  std::size_t model_floats = 0;  // the model's size
  bool reply = false;           // a reply or refusal (else a request or goodbye)
};

// Checks `message` (the `got` bytes that arrived) against `expect`: its length (a header alone for
// a goodbye or refusal, with the model for the rest), magic, kind, sender, sequence and the
// model's CRC. Returns the header, or nullopt with `why` set to one line naming the fault.
std::optional<Header> check(std::span<const std::byte> message, std::size_t got,
                            const Expect& expect, std::string& why);

// The paper's deadlock-free split (Lian et al. 2018, section 5) of `g`'s edges, taken both ways:
// a breadth-first 2-colouring from rank 0 where the graph is bipartite; otherwise even ranks
// against odd ones where the edges between them connect every rank, else the search's colouring
// (whose tree edges always connect them). Actives (colour 0, rank 0 among them) start every
// exchange; passives only answer. Edges within one colour are not used.
struct Roles {
  std::vector<bool> active;                   // per rank
  std::vector<std::vector<int>> partners;     // per rank: its neighbors of the other colour, ascending
  int dropped_edges = 0;                      // undirected edges within one colour, unused
};
Roles split_roles(const topology::Graph& g);

}  // namespace murmur::optimizers::adpsgd_wire
