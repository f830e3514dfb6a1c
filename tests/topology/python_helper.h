// Test helpers: a scratch directory and a runner for Python scripts (tests/python.h's interpreter,
// with numpy), so topology figures can be checked against numpy.linalg. Tests where numpy is
// missing skip with MURMUR_SKIP (tests/skip.h).
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

#include "tests/python.h"
#include "tests/skip.h"

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

// `p` in single quotes for the shell (paths here come from temp_directory_path: no quotes).
inline std::string quoted(const std::filesystem::path& p) {
  std::string q(1, '\'');
  q.append(p.string());
  q.push_back('\'');
  return q;
}

inline void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct CommandResult {
  int code = -1;    // exit status, or -1 if it did not exit normally
  std::string out;  // its stdout
  std::string err;  // its stderr
};

// Runs `command` through the shell, with stdout and stderr captured in files in `dir`.
inline CommandResult run_command(const std::string& command, const std::filesystem::path& dir) {
  const auto out = dir / "command.out";
  const auto err = dir / "command.err";
  const std::string full = command + " >" + quoted(out) + " 2>" + quoted(err);
  const int status = std::system(full.c_str());
  CommandResult r;
  r.code = (status != -1 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

// Returns true iff the test interpreter can import numpy.
inline bool have_numpy() { return test_python::can_import("numpy"); }

// Runs the Python `script` with `args`; returns its stdout, or nullopt (after printing its
// output) if it exits nonzero.
inline std::optional<std::string> run_python(const std::string& script, const std::string& args,
                                             const std::filesystem::path& dir) {
  const auto file = dir / "check.py";
  write_file(file, script);
  const CommandResult r =
      run_command(test_python::interpreter() + " " + quoted(file) + " " + args, dir);
  if (r.code != 0) {
    std::fprintf(stderr, "python failed (%d):\n%s%s\n", r.code, r.out.c_str(), r.err.c_str());
    return std::nullopt;
  }
  return r.out;
}

}  // namespace murmur::topology::testing
