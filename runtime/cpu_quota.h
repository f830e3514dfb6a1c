// CpuQuota: the CPU quota of one cgroup that murmur-launch made for a peer (network.stragglers
// in quota mode, tools/murmur_netem/cpu_quota.py), read and changed by the peer itself when its
// straggler window opens or closes. cgroup v2 (cpu.max: "QUOTA PERIOD", or "max") and v1
// (cpu.cfs_quota_us, cpu.cfs_period_us; -1 for none) alike.
#pragma once

#include <filesystem>

namespace murmur::runtime {

class CpuQuota {
 public:
  // Throws IoError naming `dir` when it holds neither version's files.
  explicit CpuQuota(std::filesystem::path dir);

  // The quota in cores (quota / period); 0 when the cgroup has none.
  double cores() const;
  // Sets the quota to `cores` (> 0) of the current period. Throws IoError naming the file.
  void set_cores(double cores);
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  bool v2_ = false;
};

}  // namespace murmur::runtime
