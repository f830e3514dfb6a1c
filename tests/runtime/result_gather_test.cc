// The results of a run that shares no directory: every rank of the final average sends its
// result.json to the lowest over the transport. The lowest gets them all, by rank; a rank whose
// message is malformed (bad CRC, another rank's result, a bad header) or never comes is left out
// with a warning, and the gatherer goes on with the rest.
#include "runtime/result_gather.h"

#include <catch2/catch.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <thread>

#include "core/crc32c.h"
#include "core/error.h"
#include "transport/frame.h"
#include "transport/inproc/transport.h"
#include "transport/tag.h"
#include "tests/transport/backends.h"

namespace {

using murmur::runtime::gather_results;
using murmur::transport::testing::RankContext;
using murmur::transport::testing::run_ranks;

murmur::TransportConfig short_timeouts() {
  murmur::TransportConfig c;
  c.peer_timeout_ms = 2000;
  c.recv_timeout_ms = 4000;
  return c;
}

nlohmann::json result_of(int rank) {
  return {{"rank", rank}, {"test_accuracy", 0.5 + 0.01 * rank},
          {"evals", {{{"step", 10}, {"test_accuracy", 0.4}}}}};
}

// Sends `text` as a result message from this rank to `to`, with `header` in front.
void send_raw(murmur::transport::Transport& t, int to, std::vector<std::byte> header, std::string text) {
  const murmur::transport::TagLayout layout(t);
  const auto hr = t.register_region(header);
  const auto br = t.register_region(std::as_writable_bytes(std::span(text.data(), text.size())));
  std::vector<murmur::transport::Request> requests{
      t.send(to, layout.make(murmur::transport::purpose::kResults, 0, 0, 0), *hr, {0, header.size()}),
      t.send(to, layout.make(murmur::transport::purpose::kResults, 0, 0, 1), *br, {0, text.size()})};
  MURMUR_CHECK(murmur::transport::wait_all(t, requests, murmur::transport::deadline_after(std::chrono::seconds(20))));
}

}  // namespace

TEST_CASE("results gather at the lowest rank of the final average, on every backend", "[runtime]") {
  spdlog::default_logger();  // built before the ranks' threads log (inproc; see host_list_test)
  for (const std::string& backend : murmur::transport::testing::built_backends()) {
    INFO(backend);
    // Ranks 1..3 averaged (rank 0 died): rank 1 gathers.
    const auto results = run_ranks(backend, 4, [](RankContext& ctx) {
      if (ctx.rank() == 0) return;
      const auto got = gather_results(ctx.transport(), short_timeouts(), {1, 2, 3}, result_of(ctx.rank()));
      if (ctx.rank() != 1) {
        MURMUR_CHECK(got.empty());
        return;
      }
      MURMUR_CHECK(got.size() == 3);
      for (const int r : {1, 2, 3}) MURMUR_CHECK(got.at(r) == result_of(r));
    });
    CHECK(murmur::transport::testing::failures(results).empty());
  }
}

TEST_CASE("results: a malformed result is left out, the rest kept", "[runtime]") {
  const auto results = run_ranks("tcp", 5, [](RankContext& ctx) {
    auto& t = ctx.transport();
    const std::string text = result_of(ctx.rank()).dump();
    switch (ctx.rank()) {
      case 2: {  // the text does not match its CRC
        auto header = murmur::runtime::encode_result_header(text);
        header[16] ^= std::byte{1};
        send_raw(t, 0, header, text);
        return;
      }
      case 3:  // another rank's result
        gather_results(t, short_timeouts(), {0, 1, 2, 3, 4}, result_of(1));
        return;
      case 4: {  // a header that claims more than a result can be: refused before allocating
        auto header = murmur::runtime::encode_result_header(text);
        murmur::transport::store_le<std::uint64_t>(header.data() + 8, std::uint64_t{1} << 40);
        send_raw(t, 0, header, text);
        return;
      }
      default: {
        const auto got = gather_results(t, short_timeouts(), {0, 1, 2, 3, 4}, result_of(ctx.rank()));
        if (ctx.rank() == 0) {
          MURMUR_CHECK(got.size() == 2);
          MURMUR_CHECK(got.at(0) == result_of(0));
          MURMUR_CHECK(got.at(1) == result_of(1));
        }
      }
    }
  });
  CHECK(murmur::transport::testing::failures(results).empty());
}

TEST_CASE("results: a rank that sends nothing is given up after the timeouts", "[runtime]") {
  // Rank 2's transport stays up, but it never sends its result.
  auto world = murmur::transport::inproc::make_world(3);
  std::thread one([&] { gather_results(*world[1], short_timeouts(), {0, 1, 2}, result_of(1)); });
  murmur::TransportConfig quick;
  quick.peer_timeout_ms = 200;  // inproc cannot tell silence from slowness: this bound applies
  const auto got = gather_results(*world[0], quick, {0, 1, 2}, result_of(0));
  one.join();
  CHECK(got.size() == 2);
  CHECK(got.count(2) == 0);
  CHECK(got.at(1) == result_of(1));
}

TEST_CASE("results: the header and the text are checked before anything is kept", "[runtime]") {
  using murmur::runtime::decode_result;
  using murmur::runtime::decode_result_header;
  using murmur::runtime::encode_result_header;
  const std::string text = result_of(3).dump();
  auto header = encode_result_header(text);
  std::uint32_t crc = 0;
  CHECK(decode_result_header(header, "rank 3", &crc) == text.size());
  CHECK(decode_result(text, crc, 3) == result_of(3));
  CHECK_THROWS_WITH(decode_result(text, crc, 2), Catch::Contains("rank 2") && Catch::Contains("names rank 3"));
  CHECK_THROWS_WITH(decode_result(text, crc ^ 1, 3), Catch::Contains("CRC32C"));
  CHECK_THROWS_WITH(decode_result("[1, 2]", murmur::crc32c("[1, 2]"), 3), Catch::Contains("not a JSON object"));
  CHECK_THROWS_WITH(decode_result("{\"rank\"", murmur::crc32c("{\"rank\""), 3), Catch::Contains("not a JSON object"));
  CHECK_THROWS_WITH(decode_result_header(std::span(header).first(20), "rank 3", &crc),
                    Catch::Contains("20 bytes"));
  auto bad = header;
  bad[0] = std::byte{0};
  CHECK_THROWS_WITH(decode_result_header(bad, "rank 3", &crc), Catch::Contains("rank 3") && Catch::Contains("magic"));
  bad = header;
  bad[4] = std::byte{9};
  CHECK_THROWS_WITH(decode_result_header(bad, "rank 3", &crc), Catch::Contains("version 9"));
  for (const std::uint64_t length : {std::uint64_t{0}, murmur::runtime::kMaxResultBytes + 1}) {
    bad = header;
    murmur::transport::store_le<std::uint64_t>(bad.data() + 8, length);
    CHECK_THROWS_WITH(decode_result_header(bad, "rank 3", &crc), Catch::Contains("outside 1.."));
  }
}
