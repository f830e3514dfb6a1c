// The sample shuffle (GossipGraD): over inproc ranks, a round moves k samples from each peer to
// the partner its rotation names, whole (image, label, index), in place of k of the partner's;
// across the world no sample is lost or doubled; a trade lands while later steps run; a forged
// message is refused before a byte of it is used; the combinations it cannot run are refused.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <set>

#include "core/crc32c.h"
#include "core/error.h"
#include "nn/partition.h"
#include "runtime/sample_shuffle.h"
#include "tests/time_scale.h"
#include "tests/transport/backends.h"
#include "transport/collectives.h"
#include "transport/tag.h"

namespace murmur::runtime {
namespace {

namespace tt = transport::testing;

// 400 samples of 4 floats, sample i's floats all i, label i % 10.
nn::Dataset numbered() {
  nn::Dataset d;
  d.size = 400;
  d.channels = 1;
  d.height = 2;
  d.width = 2;
  d.classes = 10;
  for (int i = 0; i < d.size; ++i) {
    for (int f = 0; f < 4; ++f) d.images.push_back(static_cast<float>(i));
    d.labels.push_back(i % 10);
  }
  return d;
}

ExperimentConfig shuffled(int world, double fraction, std::int64_t every) {
  ExperimentConfig c;
  c.world.size = world;
  c.algorithm.name = "dpsgd";
  c.data.shuffle.fraction = fraction;
  c.data.shuffle.every_steps = every;
  return c;
}

const auto kTimeout = murmur::testing::scaled(std::chrono::milliseconds(20000));

TEST_CASE("a shuffle round trades k whole samples with the rotation's partners, losing none",
          "[runtime][shuffle]") {
  const int world = GENERATE(2, 3, 4);
  CAPTURE(world);
  const nn::Dataset data = numbered();
  const ExperimentConfig config = shuffled(world, 0.1, 5);
  const auto shards = nn::partition_all(data.labels, data.classes, world, config.data, 1);
  std::int64_t smallest = data.size;
  for (const auto& s : shards) smallest = std::min<std::int64_t>(smallest, static_cast<std::int64_t>(s.size()));
  std::mutex mu;
  std::vector<std::vector<std::int64_t>> after(static_cast<std::size_t>(world));
  auto results = tt::run_ranks("inproc", world, [&](tt::RankContext& ctx) {
    const int r = ctx.rank();
    const auto& mine = shards[static_cast<std::size_t>(r)];
    SampleShuffle shuffle(data, mine, smallest, config, r, 100);
    MURMUR_CHECK(shuffle.per_round() == smallest / 10);
    MURMUR_CHECK(shuffle.local().size == static_cast<std::int64_t>(mine.size()));
    // Steps 1-4: nothing; step 5 posts round 1 (shift 2 of a 4-world's hypercube, 1 of 2's,
    // 2 of 3's), steps 6-9 may land it, step 10 waits for it and posts round 2.
    for (std::int64_t step = 1; step <= 9; ++step) shuffle.after_step(ctx.transport(), step, kTimeout);
    shuffle.complete(ctx.transport(), kTimeout);
    MURMUR_CHECK(shuffle.received() == shuffle.per_round());
    const int dims = world <= 2 ? 1 : 2;
    const int shift = 1 << (1 % dims);
    const int from = (r - shift % world + world) % world;
    const std::set<std::int64_t> theirs(shards[static_cast<std::size_t>(from)].begin(),
                                        shards[static_cast<std::size_t>(from)].end());
    const std::set<std::int64_t> own(mine.begin(), mine.end());
    std::int64_t came = 0;
    for (std::int64_t i = 0; i < shuffle.local().size; ++i) {
      const std::int64_t o = shuffle.origin()[static_cast<std::size_t>(i)];
      // Whole: the image and label are those of the sample the index names.
      MURMUR_CHECK(shuffle.local().image(i)[3] == static_cast<float>(o));
      MURMUR_CHECK(shuffle.local().labels[static_cast<std::size_t>(i)] == o % 10);
      if (!own.count(o)) {
        MURMUR_CHECK(theirs.count(o) == 1);
        ++came;
      }
    }
    MURMUR_CHECK(came == shuffle.per_round());
    std::lock_guard lock(mu);
    after[static_cast<std::size_t>(r)] = shuffle.origin();
  });
  INFO(tt::failures(results));
  REQUIRE(tt::failures(results).empty());
  // A permutation: every sample of the data set on exactly one peer still.
  std::vector<std::int64_t> all;
  for (const auto& a : after) all.insert(all.end(), a.begin(), a.end());
  std::sort(all.begin(), all.end());
  CHECK(static_cast<std::int64_t>(all.size()) == data.size);
  CHECK(std::adjacent_find(all.begin(), all.end()) == all.end());
}

TEST_CASE("a forged shuffle message is refused before it is used", "[runtime][shuffle]") {
  // Rank 1 sends rank 0 (its round-1 source in a world of 2) a message with one thing wrong;
  // rank 0 throws ProtocolError naming rank 1 and what, its shard untouched.
  struct Case {
    const char* name;
    std::function<void(std::vector<std::byte>&)> spoil;
    const char* expect;
  };
  auto put32 = [](std::vector<std::byte>& m, std::size_t at, std::uint32_t v) { std::memcpy(m.data() + at, &v, 4); };
  auto reseal = [&](std::vector<std::byte>& m) {
    put32(m, 12, crc32c(std::span<const std::byte>(m).subspan(24)));
  };
  const std::vector<Case> cases{
      {"bad crc", [&](std::vector<std::byte>& m) { m[30] ^= std::byte{1}; }, "CRC32C mismatch"},
      {"bad magic", [&](std::vector<std::byte>& m) { put32(m, 0, 0x12345678); }, "bad magic"},
      {"label out of range",
       [&](std::vector<std::byte>& m) { put32(m, 24 + 8 * 20, 77); reseal(m); }, "label 77 out of range"},
      {"index out of range",
       [&](std::vector<std::byte>& m) { std::int64_t v = 9999; std::memcpy(m.data() + 24, &v, 8); reseal(m); },
       "sample index 9999 out of range"},
      {"short", [&](std::vector<std::byte>& m) { m.resize(m.size() - 4); }, "bytes, expected"},
  };
  const nn::Dataset data = numbered();
  const ExperimentConfig config = shuffled(2, 0.1, 1);
  const auto shards = nn::partition_all(data.labels, data.classes, 2, config.data, 1);
  for (const Case& c : cases) {
    CAPTURE(c.name);
    auto results = tt::run_ranks("inproc", 2, [&](tt::RankContext& ctx) {
      transport::Transport& t = ctx.transport();
      if (ctx.rank() == 0) {
        SampleShuffle shuffle(data, shards[0], 200, config, 0, 100);
        const auto before = shuffle.origin();
        try {
          shuffle.after_step(t, 1, kTimeout);
          shuffle.complete(t, kTimeout);
        } catch (const ProtocolError& e) {
          const std::string what = e.what();
          MURMUR_CHECK(what.find("from rank 1") != std::string::npos);
          MURMUR_CHECK(what.find(c.expect) != std::string::npos);
          MURMUR_CHECK(shuffle.origin() == before);
          return;
        }
        throw std::runtime_error("no ProtocolError");
      }
      // Rank 1: a real round-1 message from its own shuffle's packing, spoiled, then rank 0's.
      std::vector<std::byte> msg(shuffle_message_bytes(20, 4));
      {
        // Build the genuine message: header, indices, labels, images of rank 1's first 20.
        std::size_t at = 24;
        for (int j = 0; j < 20; ++j, at += 8) std::memcpy(msg.data() + at, &shards[1][j], 8);
        for (int j = 0; j < 20; ++j, at += 4) {
          const std::int32_t l = data.labels[static_cast<std::size_t>(shards[1][j])];
          std::memcpy(msg.data() + at, &l, 4);
        }
        for (int j = 0; j < 20; ++j, at += 16) std::memcpy(msg.data() + at, data.image(shards[1][j]), 16);
        put32(msg, 0, 0x4853524d);
        put32(msg, 4, 20);
        put32(msg, 8, 4);
        const std::uint64_t round = 1;
        std::memcpy(msg.data() + 16, &round, 8);
        reseal(msg);
      }
      c.spoil(msg);
      tt::send_forged(t, 0, transport::TagLayout(t).make(transport::purpose::kShuffle, 1), msg,
                      shuffle_message_bytes(20, 4), kTimeout);
    });
    INFO(tt::failures(results));
    CHECK(tt::failures(results).empty());
  }
}

TEST_CASE("the shuffle is refused where it cannot run, naming the key", "[runtime][shuffle]") {
  const nn::Dataset data = numbered();
  std::vector<std::int64_t> shard(200);
  for (int i = 0; i < 200; ++i) shard[static_cast<std::size_t>(i)] = i;
  auto refused = [&](const ExperimentConfig& c, const std::string& says) {
    CAPTURE(says);
    CHECK_THROWS_WITH(SampleShuffle(data, shard, 200, c, 0, 10),
                      Catch::Contains("data.shuffle.fraction") && Catch::Contains(says));
  };
  refused(shuffled(1, 0.1, 0), "2 or more peers");
  ExperimentConfig c = shuffled(4, 0.1, 0);
  c.algorithm.overlap = true;
  refused(c, "algorithm.overlap");
  c = shuffled(4, 0.1, 0);
  c.algorithm.name = "adpsgd";
  refused(c, "adpsgd");
  c = shuffled(4, 0.1, 0);
  c.run.on_peer_failure = "continue";
  refused(c, "run.on_peer_failure: stop");
  refused(shuffled(4, 0.001, 0), "under one sample of the smallest shard (200 samples)");
  // A checkpoint's shard with an index outside the data set: refused, the shard untouched.
  SampleShuffle shuffle(data, shard, 200, shuffled(4, 0.1, 0), 0, 10);
  std::vector<std::int64_t> bad(shard.rbegin(), shard.rend());
  bad[150] = 400;
  CHECK_THROWS_WITH(shuffle.restore(bad), Catch::Contains("sample 150") && Catch::Contains("400"));
  CHECK(shuffle.origin() == shard);
  CHECK(shuffle.local().image(0)[0] == 0.0f);
  // every_steps 0: once an epoch.
  CHECK(SampleShuffle(data, shard, 200, shuffled(4, 0.1, 0), 0, 37).every_steps() == 37);
}

}  // namespace
}  // namespace murmur::runtime
