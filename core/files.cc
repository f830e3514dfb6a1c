#include "core/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"

namespace murmur {
namespace {

[[noreturn]] void throw_errno(std::string_view what, const std::filesystem::path& path, int err) {
  throw IoError(fmt::format("{}: {}: {}", path.string(), what, std::strerror(err)));
}

// Unique among processes (pid) and among threads of this one (counter), so concurrent writers
// of the same target never share a temp file; the last rename wins, each one whole.
std::filesystem::path temp_path_for(const std::filesystem::path& target) {
  static std::atomic<unsigned> counter{0};
  return target.string() + fmt::format(".tmp.{}.{}", ::getpid(), counter.fetch_add(1));
}

void fsync_directory(const std::filesystem::path& dir) {
  const std::filesystem::path d = dir.empty() ? std::filesystem::path(".") : dir;
  const int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_errno("cannot open directory to fsync", d, errno);
  // Some file systems refuse fsync on a directory (EINVAL); the rename is done either way.
  if (::fsync(fd) != 0 && errno != EINVAL) {
    const int err = errno;
    ::close(fd);
    throw_errno("fsync of directory failed", d, err);
  }
  ::close(fd);
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::filesystem::path target)
    : target_(std::move(target)), temp_(temp_path_for(target_)) {
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_errno("cannot create temp file", temp_, errno);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {  // not committed: leave no trace
    ::close(fd_);
    ::unlink(temp_.c_str());
  }
}

void AtomicFileWriter::write(std::span<const std::byte> bytes) {
  if (fd_ < 0) throw IoError(fmt::format("{}: write after commit", target_.string()));
  const std::byte* p = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("write failed", temp_, errno);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  if (fd_ < 0) throw IoError(fmt::format("{}: commit called twice", target_.string()));
  if (::fsync(fd_) != 0) throw_errno("fsync failed", temp_, errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(temp_.c_str());
    throw_errno("close failed", temp_, err);
  }
  if (::rename(temp_.c_str(), target_.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp_.c_str());
    throw_errno("cannot rename temp file into place", target_, err);
  }
  fsync_directory(target_.parent_path());
}

void atomic_write_file(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  AtomicFileWriter writer(path);
  writer.write(bytes);
  writer.commit();
}

std::vector<std::byte> read_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno("cannot open", path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw_errno("cannot stat", path, err);
  }
  std::vector<std::byte> out(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  // Read to EOF rather than to st_size: a file may grow or shrink under us.
  while (true) {
    if (done == out.size()) out.resize(out.size() + 65536);
    const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw_errno("read failed", path, err);
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  out.resize(done);
  return out;
}

std::string read_text_file(const std::filesystem::path& path) {
  const std::vector<std::byte> bytes = read_file(path);
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

}  // namespace murmur
