// Per-peer metrics as JSON Lines: one JSON object per line, appended to a file that pandas,
// jq or the sweep report read while the run is still going. Thread-safe: the training loop and
// the communication thread may write to one sink; each line lands whole, never interleaved.
#pragma once

#include <chrono>
#include <filesystem>
#include <mutex>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace murmur {

class MetricsSink {
 public:
  // Opens `file` for appending (creating it, not its directory). Throws IoError if it cannot.
  explicit MetricsSink(std::filesystem::path file);
  // Flushes what is buffered; errors are dropped here (a destructor cannot throw), so call
  // flush() first where losing the tail matters.
  ~MetricsSink();
  MetricsSink(const MetricsSink&) = delete;
  MetricsSink& operator=(const MetricsSink&) = delete;

  // Appends `record` (an object) as one line. Buffered: the line reaches the file on flush(),
  // on destruction, or by itself once 64 KiB are pending or a second has passed since the last
  // flush. Throws IoError if a flush it triggers fails.
  void write(const nlohmann::json& record);
  // Hands every buffered line to the OS. Throws IoError naming the file.
  void flush();

  const std::filesystem::path& path() const { return path_; }

 private:
  void flush_locked();

  std::filesystem::path path_;
  std::mutex mutex_;  // guards fd_ writes, buffer_ and last_flush_
  int fd_ = -1;
  std::string buffer_;
  std::chrono::steady_clock::time_point last_flush_;
};

}  // namespace murmur
