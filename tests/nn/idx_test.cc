// The IDX reader against files written here with zlib: good ones round-trip, and every kind of
// damage (missing, bad magic, short header, short payload, trailing bytes, corrupt gzip,
// implausible dimensions, labels out of range) throws DataError naming the file and the problem.
#include "nn/idx.h"

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <zlib.h>

#include "core/error.h"

namespace fs = std::filesystem;
using murmur::DataError;
using murmur::nn::read_idx_images;
using murmur::nn::read_idx_labels;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "murmur_idx_XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void put_u32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<std::uint8_t>(v >> s));
}

std::vector<std::uint8_t> images_bytes(std::uint32_t magic, std::uint32_t n, std::uint32_t rows,
                                       std::uint32_t cols, std::size_t pixels) {
  std::vector<std::uint8_t> b;
  put_u32(b, magic);
  put_u32(b, n);
  put_u32(b, rows);
  put_u32(b, cols);
  for (std::size_t i = 0; i < pixels; ++i) b.push_back(static_cast<std::uint8_t>(i * 7));
  return b;
}

std::vector<std::uint8_t> labels_bytes(std::uint32_t magic, std::uint32_t n,
                                       std::vector<std::uint8_t> labels) {
  std::vector<std::uint8_t> b;
  put_u32(b, magic);
  put_u32(b, n);
  b.insert(b.end(), labels.begin(), labels.end());
  return b;
}

fs::path write_gz(const fs::path& file, const std::vector<std::uint8_t>& bytes) {
  gzFile f = gzopen(file.c_str(), "wb");
  REQUIRE(f != nullptr);
  if (!bytes.empty())
    REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) ==
            static_cast<int>(bytes.size()));
  REQUIRE(gzclose(f) == Z_OK);
  return file;
}

// Returns the DataError message of `fn`, failing the test if it does not throw one.
template <class Fn>
std::string data_error(Fn fn) {
  try {
    fn();
  } catch (const DataError& e) {
    return e.what();
  }
  FAIL("expected a DataError");
  return {};
}

}  // namespace

TEST_CASE("IDX images and labels round-trip", "[nn][idx]") {
  TempDir dir;
  const auto images = write_gz(dir.path / "img.gz", images_bytes(0x803, 3, 2, 4, 24));
  const auto got = read_idx_images(images);
  CHECK(got.count == 3);
  CHECK(got.rows == 2);
  CHECK(got.cols == 4);
  REQUIRE(got.pixels.size() == 24);
  for (std::size_t i = 0; i < 24; ++i) CHECK(got.pixels[i] == static_cast<std::uint8_t>(i * 7));

  const auto labels = write_gz(dir.path / "lab.gz", labels_bytes(0x801, 4, {0, 9, 3, 9}));
  CHECK(read_idx_labels(labels, 10) == std::vector<std::uint8_t>{0, 9, 3, 9});
}

TEST_CASE("IDX reader names a missing file", "[nn][idx]") {
  TempDir dir;
  const auto msg = data_error([&] { read_idx_images(dir.path / "nope.gz"); });
  CHECK_THAT(msg, Catch::Contains("nope.gz: no such file"));
}

TEST_CASE("IDX reader rejects a bad magic", "[nn][idx]") {
  TempDir dir;
  const auto file = write_gz(dir.path / "train-images-idx3-ubyte.gz", images_bytes(0, 1, 1, 1, 1));
  CHECK_THAT(data_error([&] { read_idx_images(file); }),
             Catch::Contains("train-images-idx3-ubyte.gz: bad magic 0x00000000, expected "
                             "0x00000803 (IDX images)"));
  // A label file is not an image file, nor the reverse.
  const auto labels = write_gz(dir.path / "l.gz", labels_bytes(0x801, 1, {1}));
  CHECK_THAT(data_error([&] { read_idx_images(labels); }), Catch::Contains("bad magic 0x00000801"));
  CHECK_THAT(data_error([&] { read_idx_labels(file, 10); }),
             Catch::Contains("expected 0x00000801 (IDX labels)"));
}

TEST_CASE("IDX reader rejects short headers and payloads", "[nn][idx]") {
  TempDir dir;
  const auto empty = write_gz(dir.path / "empty.gz", {});
  CHECK_THAT(data_error([&] { read_idx_images(empty); }), Catch::Contains("empty.gz: truncated"));

  auto head = images_bytes(0x803, 60000, 28, 28, 0);
  head.resize(10);
  const auto short_head = write_gz(dir.path / "head.gz", head);
  CHECK_THAT(data_error([&] { read_idx_images(short_head); }),
             Catch::Contains("truncated: header of 10 bytes, need 16"));

  const auto short_pixels = write_gz(dir.path / "pix.gz", images_bytes(0x803, 60000, 28, 28, 1234));
  CHECK_THAT(data_error([&] { read_idx_images(short_pixels); }),
             Catch::Contains("pix.gz: truncated: header says 60000 images of 28x28, file holds "
                             "1234 bytes of pixels"));

  const auto short_labels = write_gz(dir.path / "lab.gz", labels_bytes(0x801, 5, {1, 2}));
  CHECK_THAT(data_error([&] { read_idx_labels(short_labels, 10); }),
             Catch::Contains("truncated: header says 5 labels, file holds 2 bytes of labels"));
}

TEST_CASE("IDX reader rejects trailing data", "[nn][idx]") {
  TempDir dir;
  const auto file = write_gz(dir.path / "long.gz", images_bytes(0x803, 2, 2, 2, 9));
  CHECK_THAT(data_error([&] { read_idx_images(file); }), Catch::Contains("trailing data"));
}

TEST_CASE("IDX reader bounds dimensions before allocating", "[nn][idx]") {
  TempDir dir;
  const auto wide = write_gz(dir.path / "wide.gz", images_bytes(0x803, 1, 5000, 28, 0));
  CHECK_THAT(data_error([&] { read_idx_images(wide); }), Catch::Contains("implausible dimensions"));
  const auto zero = write_gz(dir.path / "zero.gz", images_bytes(0x803, 1, 0, 28, 0));
  CHECK_THAT(data_error([&] { read_idx_images(zero); }), Catch::Contains("implausible dimensions"));
  const auto many = write_gz(dir.path / "many.gz", images_bytes(0x803, 200'000'000, 1, 1, 0));
  CHECK_THAT(data_error([&] { read_idx_images(many); }), Catch::Contains("implausible dimensions"));
  const auto labels = write_gz(dir.path / "l.gz", labels_bytes(0x801, 0xFFFFFFFFu, {}));
  CHECK_THAT(data_error([&] { read_idx_labels(labels, 10); }),
             Catch::Contains("implausible dimensions"));
  // In bounds but huge (4096 x 4096 x 1e5 = 1.6 TB): must fail on the short read, quickly.
  const auto forged = write_gz(dir.path / "forged.gz", images_bytes(0x803, 100000, 4096, 4096, 3));
  CHECK_THAT(data_error([&] { read_idx_images(forged); }), Catch::Contains("truncated"));
}

TEST_CASE("IDX reader rejects labels beyond the classes", "[nn][idx]") {
  TempDir dir;
  const auto file = write_gz(dir.path / "l.gz", labels_bytes(0x801, 3, {1, 12, 2}));
  CHECK_THAT(data_error([&] { read_idx_labels(file, 10); }),
             Catch::Contains("l.gz: label 12 at index 1 >= 10 classes"));
}

TEST_CASE("IDX reader rejects a corrupt gzip stream", "[nn][idx]") {
  TempDir dir;
  const auto good = write_gz(dir.path / "good.gz", images_bytes(0x803, 50, 28, 28, 50 * 28 * 28));
  std::vector<char> raw(fs::file_size(good));
  std::ifstream(good, std::ios::binary).read(raw.data(), static_cast<std::streamsize>(raw.size()));

  SECTION("cut short") {
    const auto cut = dir.path / "cut.gz";
    std::ofstream(cut, std::ios::binary)
        .write(raw.data(), static_cast<std::streamsize>(raw.size() / 2));
    CHECK_THAT(data_error([&] { read_idx_images(cut); }), Catch::Contains("cut.gz: "));
  }
  SECTION("bytes flipped in the deflate stream") {
    for (std::size_t i = raw.size() / 3; i < raw.size() / 3 + 64; ++i) raw[i] ^= 0x5a;
    const auto bad = dir.path / "flipped.gz";
    std::ofstream(bad, std::ios::binary)
        .write(raw.data(), static_cast<std::streamsize>(raw.size()));
    CHECK_THAT(data_error([&] { read_idx_images(bad); }), Catch::Contains("flipped.gz: "));
  }
}
