// Test-only helpers for the ucx and ofi tests: a Bootstrap over a temp directory (each rank
// writes one file per exchange round, through a temp file and rename) and a runner that forks
// one process per rank on loopback, sets its environment, and reports each child's exit code.
// Used from one thread; children never return into Catch2 (they _exit).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"
#include "tests/time_scale.h"
#include "transport/bootstrap.h"

namespace murmur::transport::testing {

class DirBootstrap final : public Bootstrap {
 public:
  DirBootstrap(std::filesystem::path dir, int rank, int world_size)
      : dir_(std::move(dir)), rank_(rank), world_size_(world_size) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::vector<std::vector<std::byte>> exchange(std::span<const int> peers,
                                               std::span<const std::byte> mine,
                                               Deadline deadline) override {
    const int round = round_++;
    const auto tmp = file_of(rank_, round).string() + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary);
      out.write(reinterpret_cast<const char*>(mine.data()), static_cast<long>(mine.size()));
    }
    std::filesystem::rename(tmp, file_of(rank_, round));
    std::vector<std::vector<std::byte>> theirs;
    for (int p : peers) {
      const auto file = file_of(p, round);
      while (!std::filesystem::exists(file)) {
        if (Clock::now() >= deadline) throw PeerLost("dir bootstrap: rank " + std::to_string(p));
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      std::ifstream in(file, std::ios::binary);
      std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::vector<std::byte> blob(s.size());
      std::memcpy(blob.data(), s.data(), s.size());
      theirs.push_back(std::move(blob));
    }
    return theirs;
  }

 private:
  std::filesystem::path file_of(int rank, int round) const {
    return dir_ / ("r" + std::to_string(rank) + "-e" + std::to_string(round));
  }
  std::filesystem::path dir_;
  int rank_;
  int world_size_;
  int round_ = 0;
};

// A fresh directory under the system temp dir, removed when the object dies.
struct TempDir {
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "murmur-XXXXXX").string();
    path = mkdtemp(t.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::filesystem::path path;
};

using Env = std::vector<std::pair<std::string, std::string>>;

// Forks `n` ranks that each run body(rank, bootstrap) with `env` set; returns the exit codes
// (0 = body returned, 1 = it threw, printed on stderr; -1 = killed at the deadline, `timeout`
// stretched in sanitizer builds).
inline std::vector<int> run_ranks(int n, const Env& env,
                                  const std::function<void(int, Bootstrap&)>& body,
                                  std::chrono::seconds timeout = std::chrono::seconds(90)) {
  TempDir dir;
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
      int code = 0;
      try {
        DirBootstrap bootstrap(dir.path, r, n);
        body(r, bootstrap);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        code = 1;
      }
      std::fflush(nullptr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes(n, -1);
  std::vector<bool> reaped(n, false);
  const auto deadline = Clock::now() + murmur::testing::scaled(timeout);
  for (int left = n; left > 0;) {
    for (int r = 0; r < n; ++r) {
      int status = 0;
      if (reaped[r] || waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      reaped[r] = true;
      --left;
      codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (left > 0 && Clock::now() >= deadline) {
      for (int r = 0; r < n; ++r) {
        if (!reaped[r]) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], nullptr, 0);
        }
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return codes;
}

// Throws TransportError(what) unless `ok`; children report through their exit code.
inline void expect(bool ok, const std::string& what) {
  if (!ok) throw TransportError("check failed: " + what);
}

}  // namespace murmur::transport::testing
