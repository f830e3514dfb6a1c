#include "runtime/cpu_quota.h"

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <fmt/std.h>

#include "core/error.h"

namespace murmur::runtime {
namespace {

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) throw IoError(fmt::format("cannot read {}", file));
  return text.str();
}

void write_text(const std::filesystem::path& file, const std::string& text) {
  std::ofstream out(file);
  out << text;
  out.flush();
  if (!out) throw IoError(fmt::format("cannot write \"{}\" to {}", text, file));
}

// v2's cpu.max: "QUOTA PERIOD", QUOTA a number of microseconds or "max".
std::pair<std::string, double> read_max(const std::filesystem::path& dir) {
  std::istringstream in(read_text(dir / "cpu.max"));
  std::string quota;
  double period = 0;
  in >> quota >> period;
  return {quota, period};
}

}  // namespace

CpuQuota::CpuQuota(std::filesystem::path dir) : dir_(std::move(dir)) {
  v2_ = std::filesystem::exists(dir_ / "cpu.max");
  if (!v2_ && !std::filesystem::exists(dir_ / "cpu.cfs_quota_us")) {
    throw IoError(fmt::format("{} is no cgroup with a CPU quota (neither cpu.max nor cpu.cfs_quota_us)", dir_));
  }
}

double CpuQuota::cores() const {
  if (v2_) {
    const auto [quota, period] = read_max(dir_);
    if (quota == "max" || period <= 0) return 0;
    return std::stod(quota) / period;
  }
  const double quota = std::stod(read_text(dir_ / "cpu.cfs_quota_us"));
  const double period = std::stod(read_text(dir_ / "cpu.cfs_period_us"));
  return quota <= 0 || period <= 0 ? 0 : quota / period;
}

void CpuQuota::set_cores(double cores) {
  if (v2_) {
    const double period = read_max(dir_).second;
    const auto us = static_cast<std::int64_t>(std::max(1000.0, cores * period));
    write_text(dir_ / "cpu.max", fmt::format("{} {}", us, static_cast<std::int64_t>(period)));
    return;
  }
  const double period = std::stod(read_text(dir_ / "cpu.cfs_period_us"));
  // The kernel's floor is 1 ms a period.
  write_text(dir_ / "cpu.cfs_quota_us", std::to_string(static_cast<std::int64_t>(std::max(1000.0, cores * period))));
}

}  // namespace murmur::runtime
