#include "membership/messages.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "transport/frame.h"

namespace murmur::membership {
namespace {

using transport::load_le;
using transport::store_le;

void check_size(std::span<const std::byte> in, std::size_t bytes, const char* what) {
  if (in.size() != bytes) {
    throw ProtocolError(fmt::format("{} of {} bytes, expected {}", what, in.size(), bytes));
  }
}

std::int64_t load_step(const std::byte* p, const char* what, const char* field) {
  const auto v = static_cast<std::int64_t>(load_le<std::uint64_t>(p));
  if (v < 0) throw ProtocolError(fmt::format("{}: negative {} {}", what, field, v));
  return v;
}

}  // namespace

std::array<std::byte, JoinRequest::kBytes> JoinRequest::encode() const {
  std::array<std::byte, kBytes> out{};
  store_le<std::uint64_t>(out.data(), static_cast<std::uint64_t>(step));
  store_le<std::uint64_t>(out.data() + 8, wants_params ? 1 : 0);
  return out;
}

JoinRequest JoinRequest::decode(std::span<const std::byte> in) {
  check_size(in, kBytes, "a join request");
  const auto flag = load_le<std::uint64_t>(in.data() + 8);
  if (flag > 1) throw ProtocolError(fmt::format("a join request: parameters flag {}, not 0 or 1", flag));
  return {load_step(in.data(), "a join request", "step"), flag == 1};
}

std::array<std::byte, JoinAnswer::kBytes> JoinAnswer::encode() const {
  std::array<std::byte, kBytes> out{};
  store_le<std::uint64_t>(out.data(), static_cast<std::uint64_t>(step));
  store_le<std::uint64_t>(out.data() + 8, static_cast<std::uint64_t>(join_step));
  store_le<std::uint64_t>(out.data() + 16, agreements);
  const double milli = std::isfinite(pace) && pace > 0 ? std::round(pace * 1000.0) : 0.0;
  store_le<std::uint64_t>(out.data() + 24, static_cast<std::uint64_t>(std::min(milli, 1e15)));
  return out;
}

JoinAnswer JoinAnswer::decode(std::span<const std::byte> in) {
  check_size(in, kBytes, "a join answer");
  JoinAnswer a;
  a.step = load_step(in.data(), "a join answer", "step");
  a.join_step = load_step(in.data() + 8, "a join answer", "join step");
  a.agreements = load_le<std::uint64_t>(in.data() + 16);
  a.pace = static_cast<double>(load_le<std::uint64_t>(in.data() + 24)) / 1000.0;
  return a;
}

std::array<std::byte, JoinCommit::kBytes> JoinCommit::encode() const {
  std::array<std::byte, kBytes> out{};
  store_le<std::uint64_t>(out.data(), static_cast<std::uint64_t>(join_step));
  return out;
}

JoinCommit JoinCommit::decode(std::span<const std::byte> in) {
  check_size(in, kBytes, "a join commit");
  return {load_step(in.data(), "a join commit", "join step")};
}

void AgreementMessage::encode(std::span<std::byte> out) const {
  if (out.size() != size(static_cast<int>(dead.size()))) {
    throw Error("AgreementMessage::encode: buffer of the wrong size");
  }
  transport::store_le<std::uint64_t>(out.data(), static_cast<std::uint64_t>(round));
  for (std::size_t r = 0; r < dead.size(); ++r) out[8 + r] = dead[r] ? std::byte{1} : std::byte{0};
}

AgreementMessage AgreementMessage::decode(std::span<const std::byte> in, int world_size) {
  if (in.size() != size(world_size)) {
    throw ProtocolError(fmt::format("agreement message of {} bytes, expected {}", in.size(),
                                    size(world_size)));
  }
  AgreementMessage m;
  m.round = static_cast<std::int64_t>(transport::load_le<std::uint64_t>(in.data()));
  if (m.round < 0) throw ProtocolError(fmt::format("agreement message: round {}", m.round));
  m.dead.resize(static_cast<std::size_t>(world_size));
  for (int r = 0; r < world_size; ++r) {
    const auto flag = static_cast<unsigned>(in[8 + r]);
    if (flag > 1) throw ProtocolError(fmt::format("agreement message: flag {} for rank {}", flag, r));
    m.dead[r] = flag == 1;
  }
  return m;
}

}  // namespace murmur::membership
