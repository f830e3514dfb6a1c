// Test helpers: a scratch directory and a runner for /usr/bin/python3 (with numpy) scripts, so
// topology figures can be checked against numpy.linalg. Tests skip with WARN where numpy is
// missing (Catch2 v2 has no SKIP).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace murmur::topology::testing {

// A fresh directory under the system temp dir, removed with its contents on destruction.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("murmur-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `command` through the shell with stdout and stderr sent to a file in `dir`; returns the
// exit status and that output.
inline std::pair<int, std::string> run_command(const std::string& command,
                                               const std::filesystem::path& dir) {
  const auto out = dir / "command.out";
  const std::string full = command + " >'" + out.string() + "' 2>&1";
  const int status = std::system(full.c_str());
  const int code = (status != -1 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
  return {code, read_file(out)};
}

// Returns true iff /usr/bin/python3 can import numpy.
inline bool have_numpy() {
  return std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

// Runs the Python `script` with `args`; returns its stdout, or nullopt (after printing its
// output) if it exits nonzero.
inline std::optional<std::string> run_python(const std::string& script, const std::string& args,
                                             const std::filesystem::path& dir) {
  const auto file = dir / "check.py";
  write_file(file, script);
  auto [code, output] = run_command("/usr/bin/python3 '" + file.string() + "' " + args, dir);
  if (code != 0) {
    std::fprintf(stderr, "python failed (%d):\n%s\n", code, output.c_str());
    return std::nullopt;
  }
  return output;
}

}  // namespace murmur::topology::testing
