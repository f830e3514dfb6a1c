// libFuzzer target: membership's messages as they come from the network (membership/messages.h):
// the join request, answer and commit of a rejoin, and an agreement after a failed ring. The
// first input byte picks the message (and, for the agreement, the world size); the rest is the
// message. A message that decodes must encode back to the same bytes (the answer's pace, which
// travels rounded, back to a value that encodes the same); anything else must be a
// ProtocolError.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "core/error.h"
#include "membership/messages.h"

namespace {

template <class Message>
void round_trip(std::span<const std::byte> in) {
  Message m;
  try {
    m = Message::decode(in);
  } catch (const murmur::ProtocolError&) {
    return;  // refused: the expected outcome for garbage
  }
  const auto again = m.encode();
  if (again.size() != in.size() || std::memcmp(again.data(), in.data(), in.size()) != 0) {
    // The answer's pace is the one field that is not bytes as sent: it must be stable once read.
    const auto twice = Message::decode(again).encode();
    if (std::memcmp(twice.data(), again.data(), again.size()) != 0) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace murmur::membership;
  if (size == 0) return 0;
  const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data + 1), size - 1);
  switch (data[0] % 4) {
    case 0: round_trip<JoinRequest>(in); break;
    case 1: round_trip<JoinAnswer>(in); break;
    case 2: round_trip<JoinCommit>(in); break;
    default: {
      const int world = 1 + (data[0] >> 2);  // 1..64 ranks
      AgreementMessage m;
      try {
        m = AgreementMessage::decode(in, world);
      } catch (const murmur::ProtocolError&) {
        return 0;
      }
      if (static_cast<int>(m.dead.size()) != world || m.round < 0) std::abort();
      std::vector<std::byte> again(AgreementMessage::size(world));
      m.encode(again);
      if (again.size() != in.size() || std::memcmp(again.data(), in.data(), in.size()) != 0) std::abort();
    }
  }
  return 0;
}
