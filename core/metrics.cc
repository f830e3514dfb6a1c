#include "core/metrics.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace murmur {
namespace {

constexpr std::size_t kFlushBytes = 64 * 1024;
constexpr auto kFlushInterval = std::chrono::seconds(1);

}  // namespace

MetricsSink::MetricsSink(std::filesystem::path file)
    : path_(std::move(file)), last_flush_(std::chrono::steady_clock::now()) {
  // O_APPEND: a resumed run continues the same file, and each write(2) lands at the end.
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw IoError(fmt::format("{}: cannot open metrics file: {}", path_.string(), std::strerror(errno)));
  }
}

MetricsSink::~MetricsSink() {
  try {
    std::lock_guard lock(mutex_);
    flush_locked();
  } catch (...) {  // nowhere to report it from a destructor
  }
  ::close(fd_);
}

void MetricsSink::write(const nlohmann::json& record) {
  // Invalid UTF-8 in a string (a file name, say) must not cost the whole line.
  std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  line += '\n';
  std::lock_guard lock(mutex_);
  buffer_ += line;
  if (buffer_.size() >= kFlushBytes || std::chrono::steady_clock::now() - last_flush_ >= kFlushInterval) {
    flush_locked();
  }
}

void MetricsSink::flush() {
  std::lock_guard lock(mutex_);
  flush_locked();
}

void MetricsSink::flush_locked() {
  last_flush_ = std::chrono::steady_clock::now();
  std::size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      buffer_.erase(0, done);  // keep what did not make it, for the next try
      throw IoError(fmt::format("{}: cannot write metrics: {}", path_.string(), std::strerror(err)));
    }
    done += static_cast<std::size_t>(n);
  }
  buffer_.clear();
}

}  // namespace murmur
