// Helpers for runtime tests: temp directories, running murmur's binaries with a time bound.
#pragma once

#include <cstdio>
#include <filesystem>
#include <random>
#include <string>

#include "tests/time_scale.h"

namespace murmur::testing {

// A fresh directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("murmur-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs `command` through the shell under `timeout` (stretched in sanitizer builds), so a hang
// fails the test instead of CI.
inline CommandResult run_command(const std::string& command, int timeout_s = 120) {
  CommandResult r;
  const std::string full = "timeout -k 5 " + std::to_string(timeout_s * kTimeScale) +
                           " " + command + " 2>&1";
  FILE* pipe = popen(full.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

inline std::string binary(const std::string& name) {
  return std::string(MURMUR_BINARY_DIR) + "/bin/" + name;
}

}  // namespace murmur::testing
