// BatchLoader: batches gather the right rows, each epoch is a fresh permutation of the shard,
// the last partial batch is kept, the order is deterministic in the seed, and state()/restore()
// resumes mid-epoch exactly.
#include "nn/batch_loader.h"

#include <algorithm>
#include <vector>

#include <catch2/catch.hpp>

#include "core/error.h"

using murmur::nn::BatchLoader;
using murmur::nn::Dataset;

namespace {

// Sample i has every pixel equal to i and label i % classes, so a batch row names its sample.
Dataset numbered(std::int64_t n, int h = 2, int w = 3) {
  Dataset d;
  d.size = n;
  d.channels = 1;
  d.height = h;
  d.width = w;
  d.classes = 5;
  for (std::int64_t i = 0; i < n; ++i) {
    d.labels.push_back(static_cast<std::int32_t>(i % 5));
    for (int k = 0; k < h * w; ++k) d.images.push_back(static_cast<float>(i));
  }
  return d;
}

// The sample ids of the next batch, checking that rows and labels agree.
std::vector<std::int64_t> take(BatchLoader& loader, const Dataset& d) {
  const auto floats = d.sample_floats();
  std::vector<float> x(loader.batch_size() * floats, -1.0f);
  std::vector<std::int32_t> y(loader.batch_size(), -1);
  const int n = loader.next(x.data(), y.data());
  std::vector<std::int64_t> ids;
  for (int j = 0; j < n; ++j) {
    const auto id = static_cast<std::int64_t>(x[j * floats]);
    for (std::int64_t k = 0; k < floats; ++k) REQUIRE(x[j * floats + k] == static_cast<float>(id));
    REQUIRE(y[j] == id % 5);
    ids.push_back(id);
  }
  return ids;
}

std::vector<std::int64_t> take_epoch(BatchLoader& loader, const Dataset& d) {
  std::vector<std::int64_t> all;
  for (std::int64_t b = 0; b < loader.batches_per_epoch(); ++b) {
    const auto ids = take(loader, d);
    all.insert(all.end(), ids.begin(), ids.end());
  }
  return all;
}

}  // namespace

TEST_CASE("each epoch is a permutation of the shard, reshuffled", "[nn][batch_loader]") {
  const Dataset d = numbered(100);
  std::vector<std::int64_t> shard;
  for (std::int64_t i = 3; i < 100; i += 4) shard.push_back(i);  // 25 samples
  BatchLoader loader(d, shard, 8, 17);
  CHECK(loader.batches_per_epoch() == 4);
  CHECK(loader.size() == 25);

  std::vector<std::vector<std::int64_t>> epochs;
  for (int e = 0; e < 3; ++e) {
    CHECK(loader.epoch() == e);
    std::vector<int> sizes;
    std::vector<std::int64_t> order;
    for (int b = 0; b < 4; ++b) {
      const auto ids = take(loader, d);
      sizes.push_back(static_cast<int>(ids.size()));
      order.insert(order.end(), ids.begin(), ids.end());
    }
    CHECK(sizes == std::vector<int>{8, 8, 8, 1});  // the partial batch is kept
    auto sorted = order;
    std::sort(sorted.begin(), sorted.end());
    CHECK(sorted == shard);
    epochs.push_back(order);
  }
  CHECK(loader.epoch() == 3);
  CHECK(epochs[0] != epochs[1]);
  CHECK(epochs[1] != epochs[2]);
  CHECK(epochs[0] != shard);
}

TEST_CASE("the order is deterministic in the seed", "[nn][batch_loader]") {
  const Dataset d = numbered(50);
  std::vector<std::int64_t> all(50);
  for (int i = 0; i < 50; ++i) all[i] = i;
  BatchLoader a(d, all, 7, 1), b(d, all, 7, 1), c(d, all, 7, 2);
  const auto ea = take_epoch(a, d);
  CHECK(ea == take_epoch(b, d));
  CHECK(ea != take_epoch(c, d));
  CHECK(take_epoch(a, d) == take_epoch(b, d));
}

TEST_CASE("restore() resumes exactly, mid-epoch and at an epoch boundary", "[nn][batch_loader]") {
  const Dataset d = numbered(40);
  std::vector<std::int64_t> all(40);
  for (int i = 0; i < 40; ++i) all[i] = i;
  for (int skip : {0, 3, 9, 10, 13}) {  // 10 batches of 4 per epoch
    BatchLoader original(d, all, 4, 99);
    for (int i = 0; i < skip; ++i) take(original, d);
    const BatchLoader::State saved = original.state();
    std::vector<std::vector<std::int64_t>> want;
    for (int i = 0; i < 25; ++i) want.push_back(take(original, d));

    BatchLoader resumed(d, all, 4, 12345);  // the seed is replaced by the saved state
    resumed.restore(saved);
    CHECK(resumed.epoch() == skip / 10);
    for (int i = 0; i < 25; ++i) CHECK(take(resumed, d) == want[i]);
    CHECK(resumed.epoch() == original.epoch());
  }
}

TEST_CASE("batch loader rejects bad input", "[nn][batch_loader]") {
  const Dataset d = numbered(10);
  CHECK_THROWS_AS(BatchLoader(d, {}, 4, 0), murmur::DataError);
  CHECK_THROWS_AS(BatchLoader(d, {0, 10}, 4, 0), murmur::DataError);
  CHECK_THROWS_AS(BatchLoader(d, {-1}, 4, 0), murmur::DataError);
  CHECK_THROWS_AS(BatchLoader(d, {0, 1}, 0, 0), murmur::ConfigError);
  BatchLoader loader(d, {0, 1, 2}, 2, 0);
  BatchLoader::State bad = loader.state();
  bad.position = 3;
  CHECK_THROWS_AS(loader.restore(bad), murmur::CheckpointError);
  bad.position = -1;
  CHECK_THROWS_AS(loader.restore(bad), murmur::CheckpointError);
}

TEST_CASE("a batch larger than the shard returns the whole shard", "[nn][batch_loader]") {
  const Dataset d = numbered(10);
  BatchLoader loader(d, {4, 7, 2}, 64, 5);
  CHECK(loader.batches_per_epoch() == 1);
  auto ids = take(loader, d);
  std::sort(ids.begin(), ids.end());
  CHECK(ids == std::vector<std::int64_t>{2, 4, 7});
  CHECK(loader.epoch() == 1);
}
