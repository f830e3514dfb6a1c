// The one tag layout of murmur. Every message's Tag, whoever sends it (an averaging algorithm,
// membership, the runtime, a collective), is built here from five fields, high bits first:
//   purpose (6) | epoch (4) | round (20) | step (s) | chunk (c)
// within the bits a backend leaves to the caller (Transport::tag_bits(): 64 on tcp and inproc;
// ucx keeps the source rank in the top bits of its wire tag, ofi the rank and a 2-bit kind).
// The widths of step (the ring allreduce's steps, 2(N-1) for N ranks) and chunk (pieces of one
// transfer) follow the world size and the backend, and are checked once, when a layout is made:
// a world too large for its backend is one clear error at start, never a wrong tag later.
// Rounds and epochs wrap (mod 2^20, mod 16): a tag repeats only when nothing of its old use is
// still in flight. Pure values; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "transport/transport.h"

namespace murmur::transport {

// Who a message is for. Murmur's own services come first; the averaging algorithms take one
// purpose each from kFirstAlgorithm on, in the order of their registry (optimizers/).
namespace purpose {
inline constexpr unsigned kAgreement = 1;        // membership: the survivors' agreement on a ring
inline constexpr unsigned kJoin = 2;             // membership: a restarted peer's rejoin
inline constexpr unsigned kFinalAverage = 3;     // runtime: the exact average at the end
inline constexpr unsigned kConsensusDistance = 4;  // runtime: the distance to that average
inline constexpr unsigned kBenchmark = 5;        // murmur-bench and tests
inline constexpr unsigned kJoinState = 6;        // an algorithm's state handed to a rejoining rank
inline constexpr unsigned kStartStep = 7;        // runtime: the step every peer resumes from
inline constexpr unsigned kResults = 8;          // runtime: each peer's result, to the lowest
inline constexpr unsigned kModelCheck = 9;       // api: every peer's model against rank 0's
inline constexpr unsigned kUserCollective = 10;  // api: a program's own averages and barriers
inline constexpr unsigned kEndBarrier = 11;      // runtime: an asynchronous run's peers meet at its end
inline constexpr unsigned kShuffle = 12;         // runtime: the sample shuffle's trades
inline constexpr unsigned kFirstAlgorithm = 16;
inline constexpr unsigned kCount = 64;           // purposes are < kCount
}  // namespace purpose

inline constexpr int kPurposeBits = 6;
inline constexpr int kEpochBits = 4;
inline constexpr int kRoundBits = 20;
inline constexpr int kMinChunkBits = 4;  // at least 16 pieces per transfer
inline constexpr int kMaxChunkBits = 32;

// The fields of a tag, for error messages and tests.
struct TagFields {
  unsigned purpose = 0;
  unsigned epoch = 0;
  std::uint64_t round = 0;  // modulo 2^kRoundBits
  std::uint64_t step = 0;
  std::uint64_t chunk = 0;
};

class TagLayout {
 public:
  // The layout for a world of `world_size` ranks on a backend that leaves `tag_bits` bits to the
  // caller. Throws TransportError naming `backend` and the world size if fewer than
  // kMinChunkBits remain for the chunk field.
  TagLayout(int world_size, int tag_bits, std::string_view backend = "");
  // The layout of `transport`'s world and backend.
  explicit TagLayout(const Transport& transport);

  int step_bits() const { return step_bits_; }
  int chunk_bits() const { return chunk_bits_; }
  // Steps and pieces a tag can number: steps are < max_steps(), chunks < max_chunks().
  std::uint64_t max_steps() const { return std::uint64_t{1} << step_bits_; }
  std::uint64_t max_chunks() const { return std::uint64_t{1} << chunk_bits_; }

  // The tag of (purpose, round, step, chunk, epoch); round and epoch wrap. Throws Error if the
  // purpose, step or chunk do not fit their fields (a bug in the caller, not bad input).
  Tag make(unsigned purpose, std::int64_t round, std::uint64_t step = 0, std::uint64_t chunk = 0,
           unsigned epoch = 0) const;
  // `base` (a tag whose step and chunk are 0) with its step and chunk set. Throws Error as make().
  Tag with(Tag base, std::uint64_t step, std::uint64_t chunk) const;
  // `tag` with its epoch field replaced by `epoch` (mod 16).
  Tag with_epoch(Tag tag, unsigned epoch) const;
  // True iff `tag`'s step and chunk fields are 0 (so with() may fill them).
  bool is_base(Tag tag) const { return (tag & low_mask()) == 0; }
  TagFields fields(Tag tag) const;
  // "purpose 17, round 42, step 3, chunk 0" for messages.
  std::string describe(Tag tag) const;

 private:
  Tag low_mask() const { return (Tag{1} << (step_bits_ + chunk_bits_)) - 1; }

  int step_bits_ = 1;
  int chunk_bits_ = kMinChunkBits;
};

}  // namespace murmur::transport
