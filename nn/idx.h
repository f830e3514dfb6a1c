// Reader of the IDX format of (Fashion-)MNIST, gzip'd or not (zlib reads both). Free functions,
// no state: each call opens, validates and closes one file. Nothing in a file is trusted before
// it is checked: the magic, bounded dimensions, and a payload that is exactly as long as the
// header says. Every problem throws DataError naming the file and what is wrong.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace murmur::nn {

// Dimension bounds: larger headers are rejected as corrupt before any allocation.
inline constexpr std::int64_t kIdxMaxCount = 100'000'000;
inline constexpr int kIdxMaxSide = 4096;

struct IdxImages {
  std::int64_t count = 0;
  int rows = 0;
  int cols = 0;
  std::vector<std::uint8_t> pixels;  // count * rows * cols, row-major, one byte per pixel
};

// Reads an IDX3 image file (magic 0x00000803). Throws DataError ("<file>: no such file", "bad
// magic", "truncated", "trailing data", a gzip error, or dimensions beyond the bounds above).
IdxImages read_idx_images(const std::filesystem::path& file);

// Reads an IDX1 label file (magic 0x00000801). Throws DataError as above, and if a label is
// >= `classes` ("label 12 at index 7 >= 10 classes").
std::vector<std::uint8_t> read_idx_labels(const std::filesystem::path& file, int classes);

}  // namespace murmur::nn
