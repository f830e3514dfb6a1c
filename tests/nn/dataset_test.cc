// load_dataset: the synthetic set (deterministic, shared centres, learnable), the real
// Fashion-MNIST where Debian's package is installed, and the errors of a broken data directory.
#include "nn/dataset.h"

#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <zlib.h>

#include "core/error.h"
#include "nn/synthetic.h"
#include "tests/skip.h"

namespace fs = std::filesystem;
using murmur::DataConfig;
using murmur::nn::Dataset;
using murmur::nn::load_dataset;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "murmur_ds_XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void write_idx(const fs::path& file, std::uint32_t magic, std::vector<std::uint32_t> dims,
               const std::vector<std::uint8_t>& payload) {
  std::vector<std::uint8_t> b;
  dims.insert(dims.begin(), magic);
  for (std::uint32_t v : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(v >> s));
  b.insert(b.end(), payload.begin(), payload.end());
  gzFile f = gzopen(file.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, b.data(), static_cast<unsigned>(b.size())) == static_cast<int>(b.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

// Fraction of `test` that the nearest class mean of `train` classifies right: a floor on what
// an MLP can learn from these data.
double nearest_mean_accuracy(const Dataset& train, const Dataset& test) {
  const auto dim = static_cast<std::size_t>(train.sample_floats());
  std::vector<double> means(train.classes * dim, 0.0);
  std::vector<int> counts(train.classes, 0);
  for (std::int64_t i = 0; i < train.size; ++i) {
    ++counts[train.labels[i]];
    for (std::size_t k = 0; k < dim; ++k) means[train.labels[i] * dim + k] += train.image(i)[k];
  }
  for (int c = 0; c < train.classes; ++c)
    for (std::size_t k = 0; k < dim; ++k) means[c * dim + k] /= counts[c];
  std::int64_t right = 0;
  for (std::int64_t i = 0; i < test.size; ++i) {
    int best = -1;
    double best_d = 1e300;
    for (int c = 0; c < test.classes; ++c) {
      double d = 0;
      for (std::size_t k = 0; k < dim; ++k) {
        const double e = test.image(i)[k] - means[c * dim + k];
        d += e * e;
      }
      if (d < best_d) best_d = d, best = c;
    }
    right += best == test.labels[i];
  }
  return static_cast<double>(right) / static_cast<double>(test.size);
}

}  // namespace

TEST_CASE("synthetic data are deterministic and shaped as configured", "[nn][dataset]") {
  DataConfig c;
  c.name = "synthetic";
  c.synthetic.train_size = 500;
  c.synthetic.test_size = 200;
  c.synthetic.classes = 7;
  c.synthetic.height = 4;
  c.synthetic.width = 6;
  const Dataset a = load_dataset(c, 42, true);
  const Dataset b = load_dataset(c, 42, true);
  const Dataset other = load_dataset(c, 43, true);
  CHECK(a.size == 500);
  CHECK(a.channels == 1);
  CHECK(a.height == 4);
  CHECK(a.width == 6);
  CHECK(a.classes == 7);
  CHECK(a.sample_floats() == 24);
  CHECK(a.images.size() == 500u * 24u);
  CHECK(a.images == b.images);
  CHECK(a.labels == b.labels);
  CHECK(a.images != other.images);
  std::vector<int> per_class(7, 0);
  for (auto l : a.labels) ++per_class[l];
  for (int n : per_class) CHECK((n == 71 || n == 72));  // 500 = 7 * 71 + 3

  const Dataset test = load_dataset(c, 42, false);
  CHECK(test.size == 200);
  CHECK(test.images != std::vector<float>(a.images.begin(), a.images.begin() + 200 * 24));
}

TEST_CASE("synthetic train and test share centres, and are learnable", "[nn][dataset]") {
  DataConfig c;
  c.name = "synthetic";  // defaults: 10 classes of 8x8, noise 1
  const Dataset train = load_dataset(c, 7, true);
  const Dataset test = load_dataset(c, 7, false);
  CHECK(nearest_mean_accuracy(train, test) > 0.95);
  // Another seed draws other centres: the train means of seed 7 say little about them.
  const Dataset stranger = load_dataset(c, 8, false);
  CHECK(nearest_mean_accuracy(train, stranger) < 0.5);
}

TEST_CASE("Fashion-MNIST from Debian's package", "[nn][dataset]") {
  DataConfig c;
  if (!fs::exists(fs::path(c.path) / "t10k-images-idx3-ubyte.gz"))
    MURMUR_SKIP("no Fashion-MNIST at " << c.path << " (Debian package dataset-fashion-mnist)");
  const Dataset test = load_dataset(c, 0, false);
  CHECK(test.size == 10000);
  CHECK(test.channels == 1);
  CHECK(test.height == 28);
  CHECK(test.width == 28);
  CHECK(test.classes == 10);
  CHECK(test.labels[0] == 9);  // the first t10k image is an ankle boot
  double sum = 0, sq = 0;
  for (float x : test.images) sum += x, sq += double{x} * x;
  const double n = static_cast<double>(test.images.size());
  const double mean = sum / n;
  CHECK(std::abs(mean) < 0.05);  // normalized with the train mean/std
  CHECK(std::abs(std::sqrt(sq / n - mean * mean) - 1.0) < 0.05);

  c.normalize = false;
  const Dataset raw = load_dataset(c, 0, false);
  float lo = 1, hi = 0;
  for (float x : raw.images) lo = std::min(lo, x), hi = std::max(hi, x);
  CHECK(lo == 0.0f);
  CHECK(hi == 1.0f);
}

TEST_CASE("a broken Fashion-MNIST directory is a DataError naming the file", "[nn][dataset]") {
  TempDir dir;
  DataConfig c;
  c.path = dir.path.string();
  try {
    load_dataset(c, 0, true);
    FAIL("expected a DataError");
  } catch (const murmur::DataError& e) {
    CHECK_THAT(std::string(e.what()),
               Catch::Contains("train-images-idx3-ubyte.gz: no such file (install Debian's "
                               "dataset-fashion-mnist, or set data.path)"));
  }

  write_idx(dir.path / "t10k-images-idx3-ubyte.gz", 0x803, {3, 2, 2},
            std::vector<std::uint8_t>(12, 255));
  write_idx(dir.path / "t10k-labels-idx1-ubyte.gz", 0x801, {2}, {1, 2});
  CHECK_THROWS_WITH(load_dataset(c, 0, false),
                    Catch::Contains("t10k-labels-idx1-ubyte.gz: 2 labels, but") &&
                        Catch::Contains("holds 3 images"));

  write_idx(dir.path / "t10k-labels-idx1-ubyte.gz", 0x801, {3}, {1, 10, 2});
  CHECK_THROWS_AS(load_dataset(c, 0, false), murmur::DataError);

  write_idx(dir.path / "t10k-labels-idx1-ubyte.gz", 0x801, {3}, {1, 9, 2});
  c.normalize = false;
  const Dataset d = load_dataset(c, 0, false);
  CHECK(d.size == 3);
  CHECK(d.height == 2);
  CHECK(d.images[5] == 1.0f);
  CHECK(d.labels == std::vector<std::int32_t>{1, 9, 2});
}

TEST_CASE("an unknown data set name is a ConfigError", "[nn][dataset]") {
  DataConfig c;
  c.name = "cifar10";
  CHECK_THROWS_AS(load_dataset(c, 0, true), murmur::ConfigError);
}
