// Subcommands of murmur-bench register themselves here (one file each: murmur_bench_train.cc,
// murmur_bench_comm.cc, ...), so the main needs no list of them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace murmur::tools {

struct BenchCommand {
  std::string name;
  std::string help;
  // Adds the subcommand's options to `sub` and returns the function that runs it (exit code).
  std::function<std::function<int()>(CLI::App& sub)> setup;
};

inline std::vector<BenchCommand>& bench_commands() {
  static std::vector<BenchCommand> commands;
  return commands;
}

struct RegisterBench {
  explicit RegisterBench(BenchCommand c) { bench_commands().push_back(std::move(c)); }
};

}  // namespace murmur::tools
