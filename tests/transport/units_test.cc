// Pure pieces of the transport room: frame encoding and its checks, the handshake MACs, rank
// and world from config or environment, and the directory rendezvous.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <map>

#include "core/error.h"
#include "transport/frame.h"
#include "transport/handshake.h"
#include "transport/rendezvous.h"
#include "transport/world.h"

namespace murmur::transport {
namespace {

TEST_CASE("frame headers round-trip and reject bad fields", "[transport]") {
  FrameHeader h{FrameKind::kData, 0x1122334455667788ull, 100, 200, 1000, 0xDEADBEEF};
  FrameBytes b = encode(h);
  FrameHeader d = decode(b, 1 << 20, "peer");
  CHECK(d.tag == h.tag);
  CHECK(d.length == 100);
  CHECK(d.offset == 200);
  CHECK(d.total == 1000);
  CHECK(d.crc == 0xDEADBEEF);

  FrameBytes bad_magic = b;
  bad_magic[0] ^= std::byte{1};
  CHECK_THROWS_AS(decode(bad_magic, 1 << 20, "peer"), ProtocolError);
  CHECK_THROWS_AS(decode(b, 99, "peer"), ProtocolError);  // length over the maximum
  FrameHeader outside = h;
  outside.offset = 950;  // 950 + 100 > 1000
  CHECK_THROWS_AS(decode(encode(outside), 1 << 20, "peer"), ProtocolError);
  FrameHeader wrapping = h;
  wrapping.offset = ~std::uint64_t{0} - 10;
  wrapping.total = ~std::uint64_t{0};
  wrapping.length = 100;
  CHECK_THROWS_AS(decode(encode(wrapping), 1 << 20, "peer"), ProtocolError);
}

TEST_CASE("a heartbeat frame is a header alone", "[transport]") {
  FrameHeader beat{FrameKind::kHeartbeat, 0, 0, 0, 0, 0};
  beat.crc = header_crc(beat);
  FrameHeader d = decode(encode(beat), 1 << 20, "peer");
  CHECK(d.kind == FrameKind::kHeartbeat);
  CHECK(d.crc == header_crc(d));
  // A heartbeat that claims a payload (or a tag) is a confused or hostile peer.
  FrameHeader with_payload = beat;
  with_payload.length = with_payload.total = 16;
  CHECK_THROWS_WITH(decode(encode(with_payload), 1 << 20, "peer"), Catch::Contains("heartbeat"));
  FrameHeader with_tag = beat;
  with_tag.tag = 7;
  CHECK_THROWS_AS(decode(encode(with_tag), 1 << 20, "peer"), ProtocolError);
  FrameBytes unknown = encode(beat);
  unknown[6] = std::byte{4};  // kind 4
  CHECK_THROWS_WITH(decode(unknown, 1 << 20, "peer"), Catch::Contains("unknown frame kind 4"));
}

TEST_CASE("an abort frame is a header alone, inside its message", "[transport]") {
  FrameHeader abort{FrameKind::kAbort, 9, 0, 1000, 2000, 0};
  abort.crc = header_crc(abort);
  FrameHeader d = decode(encode(abort), 1 << 20, "peer");
  CHECK(d.kind == FrameKind::kAbort);
  CHECK(d.offset == 1000);
  CHECK(d.total == 2000);
  for (auto [length, offset] : {std::pair{16, 1000}, std::pair{0, 0}, std::pair{0, 2000}}) {
    FrameHeader bad = abort;
    bad.length = length;
    bad.offset = offset;
    CHECK_THROWS_WITH(decode(encode(bad), 1 << 20, "peer"), Catch::Contains("abort"));
  }
}

TEST_CASE("frame CRC covers the header and the payload", "[transport]") {
  std::vector<std::byte> payload(300, std::byte{5});
  FrameHeader h{FrameKind::kData, 1, 300, 0, 300, 0};
  auto crc = payload_crc(header_crc(h), payload);
  FrameHeader other_tag = h;
  other_tag.tag = 2;
  CHECK(payload_crc(header_crc(other_tag), payload) != crc);
  payload[299] = std::byte{6};
  CHECK(payload_crc(header_crc(h), payload) != crc);
}

TEST_CASE("handshake MACs depend on the secret, the label and both nonces", "[transport]") {
  Hello hello{0, 4, fresh_nonce()};
  Nonce theirs = fresh_nonce();
  Mac m = handshake_mac("key", kReplyLabel, hello, theirs, 2);
  CHECK(mac_equal(m, handshake_mac("key", kReplyLabel, hello, theirs, 2)));
  CHECK_FALSE(mac_equal(m, handshake_mac("other", kReplyLabel, hello, theirs, 2)));
  CHECK_FALSE(mac_equal(m, handshake_mac("key", kProofLabel, hello, theirs, 2)));
  CHECK_FALSE(mac_equal(m, handshake_mac("key", kReplyLabel, hello, fresh_nonce(), 2)));
  CHECK_FALSE(mac_equal(m, handshake_mac("key", kReplyLabel, hello, theirs, 3)));
  // The empty secret still yields a MAC (a warning, not a skipped handshake).
  CHECK_FALSE(mac_equal(handshake_mac("", kReplyLabel, hello, theirs, 2), Mac{}));
  Reply reply{2, 4, theirs, m};
  Reply back = decode_reply(encode(reply), "peer");
  CHECK(back.rank == 2);
  CHECK(mac_equal(back.mac, m));
  CHECK_THROWS_AS(decode_proof(std::array<std::byte, Proof::kBytes>{}, "peer"), ProtocolError);
  CHECK_THROWS_AS(decode_reply(std::array<std::byte, Reply::kBytes>{}, "peer"), ProtocolError);
}

TEST_CASE("rank and world come from config, launcher, Slurm or Open MPI", "[transport]") {
  std::map<std::string, std::string> env;
  Getenv getenv = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  WorldConfig config;
  CHECK(resolve_world(config, getenv).size == 1);  // a world of one needs no rank

  env = {{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "8"}};
  auto w = resolve_world(config, getenv);
  CHECK((w.rank == 3 && w.size == 8 && w.source == "SLURM_PROCID"));

  env = {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}};
  w = resolve_world(config, getenv);
  CHECK((w.rank == 1 && w.size == 2));

  env = {{"MURMUR_RANK", "0"}, {"MURMUR_WORLD_SIZE", "4"}, {"SLURM_PROCID", "3"}};
  w = resolve_world(config, getenv);
  CHECK((w.rank == 0 && w.size == 4 && w.source == "MURMUR_RANK"));

  config.rank = 2;
  config.size = 3;
  w = resolve_world(config, getenv);
  CHECK((w.rank == 2 && w.size == 3 && w.source == "config"));

  config = {};
  env = {{"MURMUR_RANK", "x"}, {"MURMUR_WORLD_SIZE", "4"}};
  CHECK_THROWS_AS(resolve_world(config, getenv), ConfigError);
  env = {{"MURMUR_RANK", "4"}, {"MURMUR_WORLD_SIZE", "4"}};
  CHECK_THROWS_AS(resolve_world(config, getenv), ConfigError);
  config.size = 4;
  env = {};
  CHECK_THROWS_AS(resolve_world(config, getenv), ConfigError);  // no rank anywhere
}

TEST_CASE("the local size comes from the launcher, Open MPI or Slurm's tasks on this node",
          "[transport]") {
  std::map<std::string, std::string> env;
  auto getenv = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  CHECK(local_size(getenv) == 1);  // started by hand
  env = {{"MURMUR_LOCAL_SIZE", "3"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "5"}};
  CHECK(local_size(getenv) == 3);
  env = {{"OMPI_COMM_WORLD_LOCAL_SIZE", "5"}};
  CHECK(local_size(getenv) == 5);
  // salloc -N 4 -n 7: 2 tasks on each of the first three nodes, 1 on the last.
  env = {{"SLURM_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "0"}};
  CHECK(local_size(getenv) == 2);
  env["SLURM_NODEID"] = "2";
  CHECK(local_size(getenv) == 2);
  env["SLURM_NODEID"] = "3";
  CHECK(local_size(getenv) == 1);
  env = {{"SLURM_TASKS_PER_NODE", "4"}};  // one node, no node id
  CHECK(local_size(getenv) == 4);
  env = {{"SLURM_TASKS_PER_NODE", "1,3"}, {"SLURM_NODEID", "1"}};
  CHECK(local_size(getenv) == 3);

  env = {{"SLURM_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "4"}};
  CHECK_THROWS_WITH(local_size(getenv), Catch::Contains("SLURM_NODEID=4") &&
                                            Catch::Contains("4 node(s)"));
  for (const char* bad : {"", "x", "2(x0)", "2(3)", "2(x3", "0", "2,,1", "2(x3)y"}) {
    CAPTURE(bad);
    env = {{"SLURM_TASKS_PER_NODE", bad}, {"SLURM_NODEID", "0"}};
    if (*bad == '\0') {
      CHECK(local_size(getenv) == 1);  // empty: not set
    } else {
      CHECK_THROWS_WITH(local_size(getenv), Catch::Contains("SLURM_TASKS_PER_NODE"));
    }
  }
  env = {{"MURMUR_LOCAL_SIZE", "0"}};
  CHECK_THROWS_WITH(local_size(getenv), Catch::Contains("MURMUR_LOCAL_SIZE"));
  env = {{"MURMUR_LOCAL_SIZE", "two"}};
  CHECK_THROWS_AS(local_size(getenv), ConfigError);
}

TEST_CASE("a launch is told apart by Slurm's job and step, or mpirun's PMIx namespace", "[transport]") {
  std::map<std::string, std::string> env;
  auto getenv = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  CHECK(launch_id(getenv) == std::nullopt);  // started by hand: no directory of its own
  env = {{"PMIX_NAMESPACE", "1334771713"}};
  CHECK(launch_id(getenv) == "pmix-1334771713");
  env = {{"SLURM_JOB_ID", "42"}, {"SLURM_STEP_ID", "3"}, {"PMIX_NAMESPACE", "slurm.pmix.42.3"}};
  CHECK(launch_id(getenv) == "slurm-42.3");
  env = {{"SLURM_JOB_ID", "42"}};  // a batch script's own shell: no step
  CHECK(launch_id(getenv) == "slurm-42");
  env = {{"PMIX_NAMESPACE", "../../etc x"}};  // never a path out of the run directory
  CHECK(launch_id(getenv) == "pmix-....etcx");
}

TEST_CASE("directory rendezvous publishes whole files and times out naming the rank", "[transport]") {
  auto dir = std::filesystem::temp_directory_path() / ("murmur-rdv-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  DirectoryRendezvous a(dir), b(dir);
  CHECK_FALSE(b.try_lookup(0).has_value());
  a.publish(0, "127.0.0.1:1234");
  CHECK(b.lookup(0, deadline_after(std::chrono::seconds(5))) == "127.0.0.1:1234");
  try {
    b.lookup(1, deadline_after(std::chrono::milliseconds(20)));
    FAIL("lookup of an absent rank returned");
  } catch (const PeerLost& e) {
    CHECK_THAT(e.what(), Catch::Contains("rank 1"));
  }
  for (auto& f : std::filesystem::directory_iterator(dir)) {
    CHECK(f.path().filename().string().find(".tmp") == std::string::npos);
  }
  std::filesystem::remove_all(dir);

  TransportConfig c;
  c.peers = {"127.0.0.1:1", "127.0.0.1:2"};
  CHECK(make_rendezvous(c, 2)->try_lookup(1) == "127.0.0.1:2");
  CHECK_THROWS_AS(make_rendezvous(c, 3), ConfigError);
  CHECK_THROWS_AS(make_rendezvous(TransportConfig{}, 2), ConfigError);
}

}  // namespace
}  // namespace murmur::transport
