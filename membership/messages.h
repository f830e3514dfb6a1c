// The messages membership sends over the network, as structs that encode to and decode from
// fixed little-endian layouts, like transport/frame.h: the rejoin protocol's (rejoin.h) and the
// agreement's (agreement.h). A decode checks the size and the values
// (no negative step) and throws ProtocolError naming what is wrong: these bytes come from the
// network. The answer's parameters travel as a
// message of their own (the model's floats), so none of these depends on the model's size.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace murmur::membership {

// Restarted peer -> every other rank: "take me back; I resumed at `step`", and, from the ranks
// it averages with, "send me your parameters" (`wants_params`).
struct JoinRequest {
  static constexpr std::size_t kBytes = 16;
  std::int64_t step = 0;
  bool wants_params = true;

  std::array<std::byte, kBytes> encode() const;
  static JoinRequest decode(std::span<const std::byte> in);
};

// Answerer -> restarted peer: where the answerer is, when it takes the peer back, and what the
// peer must adopt to fit in.
struct JoinAnswer {
  static constexpr std::size_t kBytes = 32;
  std::int64_t step = 0;          // the answerer's step when it answered
  std::int64_t join_step = 0;     // on the algorithm's clock: the answerer takes the peer back here
  std::uint64_t agreements = 0;   // the answerer's agreement count (LiveSet::agreements)
  double pace = 0;                // the answerer's fastest rounds per second (travels in 1/1000)

  std::array<std::byte, kBytes> encode() const;
  static JoinAnswer decode(std::span<const std::byte> in);
};

// Restarted peer -> every answerer (JoinStep::kAgreed): the one join step all take it back at.
struct JoinCommit {
  static constexpr std::size_t kBytes = 8;
  std::int64_t join_step = 0;

  std::array<std::byte, kBytes> encode() const;
  static JoinCommit decode(std::span<const std::byte> in);
};

// One rank's message in an agreement: its round and, per rank of the world, whether it believes
// that rank dead. On the wire: the round (8 bytes, little-endian), then one byte per rank.
struct AgreementMessage {
  std::int64_t round = 0;
  std::vector<bool> dead;  // world size entries

  static std::size_t size(int world_size) { return 8 + static_cast<std::size_t>(world_size); }
  void encode(std::span<std::byte> out) const;  // out.size() == size(dead.size())
  // Throws ProtocolError if `in` is not size(world_size) bytes, a flag is not 0 or 1, or the
  // round is negative.
  static AgreementMessage decode(std::span<const std::byte> in, int world_size);
};

}  // namespace murmur::membership
