// The membership messages that come from the network (join request, answer, commit; the
// agreement): they encode and decode back to themselves, and bytes of the wrong size or with
// impossible values are a ProtocolError, never a value.
#include <catch2/catch.hpp>

#include <vector>

#include "core/error.h"
#include "membership/agreement.h"
#include "membership/messages.h"
#include "transport/frame.h"

namespace murmur::membership {
namespace {

TEST_CASE("join messages round-trip", "[membership]") {
  const auto request = JoinRequest{1234}.encode();
  CHECK(JoinRequest::decode(request).step == 1234);
  CHECK(JoinRequest::decode(request).wants_params);
  CHECK_FALSE(JoinRequest::decode(JoinRequest{5, false}.encode()).wants_params);

  const JoinAnswer answer{700, 906, 3, 28.125};
  const JoinAnswer back = JoinAnswer::decode(answer.encode());
  CHECK(back.step == 700);
  CHECK(back.join_step == 906);
  CHECK(back.agreements == 3);
  CHECK(back.pace == 28.125);  // milli-rounds per second on the wire: exact here

  CHECK(JoinCommit::decode(JoinCommit{42}.encode()).join_step == 42);
}

TEST_CASE("join messages refuse wrong sizes and negative steps", "[membership]") {
  std::vector<std::byte> short_one(7), long_one(9);
  CHECK_THROWS_AS(JoinRequest::decode(short_one), ProtocolError);
  CHECK_THROWS_AS(JoinRequest::decode(long_one), ProtocolError);
  CHECK_THROWS_AS(JoinCommit::decode(short_one), ProtocolError);
  CHECK_THROWS_AS(JoinAnswer::decode(long_one), ProtocolError);

  auto bad = JoinAnswer{5, 6, 0, 0}.encode();
  transport::store_le<std::uint64_t>(bad.data() + 8, static_cast<std::uint64_t>(-3));
  CHECK_THROWS_WITH(JoinAnswer::decode(bad), Catch::Contains("negative join step"));
  auto negative = JoinRequest{1}.encode();
  transport::store_le<std::uint64_t>(negative.data(), ~std::uint64_t{0});
  CHECK_THROWS_AS(JoinRequest::decode(negative), ProtocolError);
  auto flag = JoinRequest{1}.encode();
  transport::store_le<std::uint64_t>(flag.data() + 8, 2);
  CHECK_THROWS_WITH(JoinRequest::decode(flag), Catch::Contains("parameters flag 2"));
  // A pace that is not a finite positive number travels as 0.
  CHECK(JoinAnswer::decode(JoinAnswer{1, 2, 0, -1.0}.encode()).pace == 0.0);
}

TEST_CASE("agreement messages round-trip and refuse what is not one", "[membership]") {
  AgreementMessage m{17, {false, true, false, true, true}};
  std::vector<std::byte> bytes(AgreementMessage::size(5));
  m.encode(bytes);
  const AgreementMessage back = AgreementMessage::decode(bytes, 5);
  CHECK(back.round == 17);
  CHECK(back.dead == m.dead);

  CHECK_THROWS_AS(AgreementMessage::decode(bytes, 4), ProtocolError);  // another world size
  bytes[8 + 2] = std::byte{7};
  CHECK_THROWS_WITH(AgreementMessage::decode(bytes, 5), Catch::Contains("flag 7 for rank 2"));
  std::vector<std::byte> wrong(AgreementMessage::size(4));
  CHECK_THROWS_AS(m.encode(wrong), Error);
}

}  // namespace
}  // namespace murmur::membership
