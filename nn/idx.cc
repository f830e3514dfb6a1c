#include "nn/idx.h"

#include <algorithm>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <zlib.h>

#include "core/error.h"

namespace murmur::nn {
namespace {

constexpr std::uint32_t kMagicImages = 0x00000803;
constexpr std::uint32_t kMagicLabels = 0x00000801;

struct GzClose {
  void operator()(gzFile_s* f) const noexcept { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzClose>;

[[noreturn]] void fail(const std::filesystem::path& file, const std::string& what) {
  throw DataError(fmt::format("{}: {}", file.string(), what));
}

GzFile open(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) fail(file, "no such file");
  GzFile f(gzopen(file.c_str(), "rb"));
  if (!f) fail(file, "cannot open for reading");
  return f;
}

// Reads up to `n` bytes; returns how many were read (short only at end of data). A corrupt gzip
// stream is an error, not an end: a truncated .gz would otherwise pass for a short file.
std::size_t read_some(gzFile f, const std::filesystem::path& file, void* into, std::size_t n) {
  std::size_t done = 0;
  auto* out = static_cast<unsigned char*>(into);
  while (done < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n - done, 1u << 30));
    const int got = gzread(f, out + done, chunk);
    if (got < 0) {
      int errnum = 0;
      const char* msg = gzerror(f, &errnum);
      fail(file, fmt::format("gzip error: {}", msg ? msg : "unknown"));
    }
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  return done;
}

std::uint32_t big_endian(const unsigned char* b) {
  return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) |
         std::uint32_t{b[3]};
}

// Reads the magic and `dims` dimensions; checks the magic before the dimensions mean anything.
std::vector<std::uint32_t> read_header(gzFile f, const std::filesystem::path& file,
                                       std::uint32_t magic, int dims, const char* kind) {
  unsigned char head[16];
  const std::size_t want = 4 + 4 * static_cast<std::size_t>(dims);
  const std::size_t got = read_some(f, file, head, want);
  if (got < 4) fail(file, fmt::format("truncated: {} bytes, shorter than an IDX header", got));
  const std::uint32_t found = big_endian(head);
  if (found != magic)
    fail(file, fmt::format("bad magic 0x{:08x}, expected 0x{:08x} (IDX {})", found, magic, kind));
  if (got < want) fail(file, fmt::format("truncated: header of {} bytes, need {}", got, want));
  std::vector<std::uint32_t> out;
  for (int d = 0; d < dims; ++d) out.push_back(big_endian(head + 4 + 4 * d));
  return out;
}

// Reads exactly `n` payload bytes and checks that nothing follows. The buffer grows in chunks
// as data arrives, so a forged header claiming terabytes fails on the short read, not on a
// giant allocation.
std::vector<std::uint8_t> read_payload(gzFile f, const std::filesystem::path& file, std::int64_t n,
                                       const std::string& claim, const char* unit) {
  constexpr std::int64_t kChunk = std::int64_t{16} << 20;
  std::vector<std::uint8_t> out;
  std::int64_t done = 0;
  while (done < n) {
    const std::int64_t step = std::min(kChunk, n - done);
    out.resize(static_cast<std::size_t>(done + step));
    const std::size_t got = read_some(f, file, out.data() + done, static_cast<std::size_t>(step));
    done += static_cast<std::int64_t>(got);
    if (static_cast<std::int64_t>(got) < step)
      fail(file,
           fmt::format("truncated: header says {}, file holds {} bytes of {}", claim, done, unit));
  }
  unsigned char extra;
  if (read_some(f, file, &extra, 1) != 0)
    fail(file, fmt::format("trailing data after the {} the header declares", claim));
  return out;
}

}  // namespace

IdxImages read_idx_images(const std::filesystem::path& file) {
  GzFile f = open(file);
  const auto dims = read_header(f.get(), file, kMagicImages, 3, "images");
  if (dims[0] > kIdxMaxCount || dims[1] == 0 || dims[1] > kIdxMaxSide || dims[2] == 0 ||
      dims[2] > kIdxMaxSide)
    fail(file, fmt::format("implausible dimensions {} images of {}x{} (bounds: count <= {}, "
                           "1 <= rows, cols <= {})",
                           dims[0], dims[1], dims[2], kIdxMaxCount, kIdxMaxSide));
  IdxImages out;
  out.count = dims[0];
  out.rows = static_cast<int>(dims[1]);
  out.cols = static_cast<int>(dims[2]);
  const std::int64_t n = out.count * out.rows * out.cols;
  out.pixels = read_payload(
      f.get(), file, n, fmt::format("{} images of {}x{}", out.count, out.rows, out.cols), "pixels");
  return out;
}

std::vector<std::uint8_t> read_idx_labels(const std::filesystem::path& file, int classes) {
  GzFile f = open(file);
  const auto dims = read_header(f.get(), file, kMagicLabels, 1, "labels");
  if (dims[0] > kIdxMaxCount)
    fail(file, fmt::format("implausible dimensions: {} labels (bound {})", dims[0], kIdxMaxCount));
  auto labels = read_payload(f.get(), file, dims[0], fmt::format("{} labels", dims[0]), "labels");
  for (std::size_t i = 0; i < labels.size(); ++i)
    if (labels[i] >= classes)
      fail(file, fmt::format("label {} at index {} >= {} classes", labels[i], i, classes));
  return labels;
}

}  // namespace murmur::nn
