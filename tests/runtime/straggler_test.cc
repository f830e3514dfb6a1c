// network.stragglers' step hooks (runtime/straggler.cc): the sleeping straggler's window, the
// quota straggler switching its own cgroup's quota between steps (on a directory that holds
// the files a cgroup has: CpuQuota reads and writes files, nothing more), and the refusal of a
// quota straggler that murmur-launch did not place in a cgroup.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/config.h"
#include "core/error.h"
#include "runtime/cpu_quota.h"
#include "runtime/step_hook.h"

namespace fs = std::filesystem;
using murmur::NetworkConfig;
using murmur::runtime::straggler_hook;

namespace {

std::string read(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write(const fs::path& file, const std::string& text) { std::ofstream(file) << text; }

double cores(const fs::path& cgroup) { return murmur::runtime::CpuQuota(cgroup).cores(); }

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("murmur-straggler-" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

NetworkConfig straggling(double factor, std::vector<int> steps, std::string mode) {
  NetworkConfig n;
  n.stragglers = {{1, factor}};
  n.straggler_steps = std::move(steps);
  n.straggler_mode = std::move(mode);
  return n;
}

}  // namespace

TEST_CASE("straggler: none for a rank that is no straggler, or a factor of 1", "[straggler]") {
  CHECK(straggler_hook(straggling(4, {}, "quota"), 0, "") == nullptr);
  CHECK(straggler_hook(straggling(1, {}, "quota"), 1, "") == nullptr);
}

TEST_CASE("straggler: a sleeping straggler sleeps only inside its window", "[straggler]") {
  auto hook = straggler_hook(straggling(3, {3, 5}, "sleep"), 1, "");
  REQUIRE(hook != nullptr);
  // Outside the window a compute time of a day would be a day's sleep: returning at all shows
  // there was none.
  hook->after_compute(2, 86400);
  hook->after_compute(5, 86400);
  const auto t = std::chrono::steady_clock::now();
  hook->after_compute(3, 0.01);  // (3 - 1) x 10 ms
  CHECK(std::chrono::steady_clock::now() - t >= std::chrono::milliseconds(20));
}

TEST_CASE("straggler: a quota straggler without murmur-launch's cgroup is refused, saying what to do",
          "[straggler]") {
  CHECK_THROWS_WITH(straggler_hook(straggling(4, {}, "quota"), 1, ""),
                    Catch::Contains("rank 1 is a straggler in quota mode") &&
                        Catch::Contains("$MURMUR_CPU_CGROUP unset") &&
                        Catch::Contains("network.straggler_mode: sleep"));
  TempDir d;
  CHECK_THROWS_WITH(straggler_hook(straggling(4, {2, 3}, "quota"), 1, d.path),
                    Catch::Contains("neither cpu.max nor cpu.cfs_quota_us"));
}

TEST_CASE("straggler: a whole-run quota straggler leaves its quota to murmur-launch", "[straggler]") {
  TempDir d;
  write(d.path / "cpu.cfs_quota_us", "12500\n");
  write(d.path / "cpu.cfs_period_us", "100000\n");
  CHECK(straggler_hook(straggling(4, {}, "quota"), 1, d.path) == nullptr);
  CHECK(read(d.path / "cpu.cfs_quota_us") == "12500\n");
}

TEST_CASE("straggler: a window's quota straggler switches its quota between steps (cgroup v1)",
          "[straggler]") {
  TempDir d;
  write(d.path / "cpu.cfs_quota_us", "50000\n");  // murmur-launch's share: half a core
  write(d.path / "cpu.cfs_period_us", "100000\n");
  auto hook = straggler_hook(straggling(4, {3, 5}, "quota"), 1, d.path);
  REQUIRE(hook != nullptr);
  CHECK(cores(d.path) == 0.5);  // step 1 is outside the window
  hook->after_compute(1, 0);
  CHECK(cores(d.path) == 0.5);
  hook->after_compute(2, 0);  // step 3 opens it: a quarter of the share
  CHECK(cores(d.path) == 0.125);
  hook->after_compute(3, 0);
  CHECK(cores(d.path) == 0.125);
  hook->after_compute(4, 0);  // step 5 is past it
  CHECK(cores(d.path) == 0.5);
}

TEST_CASE("straggler: a window that opens at step 1 is slow from the start (cgroup v2)", "[straggler]") {
  TempDir d;
  write(d.path / "cpu.max", "200000 100000\n");  // two cores
  auto hook = straggler_hook(straggling(2, {1, 2}, "quota"), 1, d.path);
  REQUIRE(hook != nullptr);
  CHECK(read(d.path / "cpu.max") == "100000 100000");
  CHECK(murmur::runtime::CpuQuota(d.path).cores() == 1.0);
  hook->after_compute(1, 0);
  CHECK(read(d.path / "cpu.max") == "200000 100000");
  write(d.path / "cpu.max", "max 100000\n");
  CHECK(murmur::runtime::CpuQuota(d.path).cores() == 0);
  CHECK_THROWS_WITH(straggler_hook(straggling(2, {1, 2}, "quota"), 1, d.path),
                    Catch::Contains("has no CPU quota to divide"));
}
