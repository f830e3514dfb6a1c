// libFuzzer target: the IDX reader of (Fashion-)MNIST, raw or gzip'd. The reader takes a path, so
// each input is written to an in-memory file (memfd) and read back through /proc/self/fd. Input:
// one selector byte (images, or labels with 1-128 classes), then the file. Every fault must be a
// DataError; what reads must be as large as its header says and within the declared bounds.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "nn/idx.h"

namespace {

// One memfd for the whole run, rewritten for each input.
const std::string& memfd_path() {
  static const std::string path = [] {
    const int fd = memfd_create("fuzz_idx", 0);
    if (fd < 0) std::abort();
    return "/proc/self/fd/" + std::to_string(fd);
  }();
  return path;
}

void rewrite(const std::uint8_t* data, std::size_t size) {
  const int fd = std::stoi(memfd_path().substr(14));
  if (ftruncate(fd, 0) != 0) std::abort();
  for (std::size_t done = 0; done < size;) {
    const ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) std::abort();
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace murmur::nn;
  if (size == 0) return 0;
  const std::uint8_t selector = data[0];
  rewrite(data + 1, size - 1);
  try {
    if (selector & 1) {
      IdxImages im = read_idx_images(memfd_path());
      if (im.count < 0 || im.count > kIdxMaxCount || im.rows < 1 || im.rows > kIdxMaxSide ||
          im.cols < 1 || im.cols > kIdxMaxSide ||
          im.pixels.size() != static_cast<std::size_t>(im.count) * im.rows * im.cols) {
        std::abort();
      }
    } else {
      const int classes = 1 + (selector >> 1);
      auto labels = read_idx_labels(memfd_path(), classes);
      for (std::uint8_t l : labels) {
        if (l >= classes) std::abort();
      }
    }
  } catch (const murmur::DataError&) {
  }
  return 0;
}
