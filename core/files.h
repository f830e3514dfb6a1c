// Whole-file I/O with crash safety. A file written here is either its old content or its
// complete new content, never a torn mix: write a temp file in the same directory, fsync it,
// rename it over the target, fsync the directory. Functions are thread-safe for distinct paths;
// an AtomicFileWriter belongs to one thread. Failures throw IoError naming the path and strerror.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace murmur {

// Streams a file into place: write() any number of times, then commit(). Destroyed without
// commit() (an exception on the way), it removes its temp file and leaves the target untouched.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::filesystem::path target);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(std::span<const std::byte> bytes);
  void write(std::string_view text) { write(std::as_bytes(std::span(text.data(), text.size()))); }
  // Makes the content durable and visible at the target path. Call at most once.
  void commit();

  const std::filesystem::path& target() const { return target_; }

 private:
  std::filesystem::path target_;
  std::filesystem::path temp_;
  int fd_ = -1;
};

void atomic_write_file(const std::filesystem::path& path, std::span<const std::byte> bytes);
inline void atomic_write_file(const std::filesystem::path& path, std::string_view text) {
  atomic_write_file(path, std::as_bytes(std::span(text.data(), text.size())));
}

// The whole content of a file. Throws IoError if it is missing or unreadable.
std::vector<std::byte> read_file(const std::filesystem::path& path);
std::string read_text_file(const std::filesystem::path& path);

}  // namespace murmur
