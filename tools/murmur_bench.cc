// murmur-bench: measured performance, never asserted in tests. Subcommands: train, comm, ...
// Each prints a table, or with --json one JSON object per line.
#include <cstdio>
#include <exception>
#include <functional>
#include <map>

#include <CLI/CLI.hpp>

#include "core/logging.h"
#include "tools/bench_registry.h"

int main(int argc, char** argv) {
  CLI::App app{"murmur-bench: training and communication benchmarks"};
  app.require_subcommand(1);
  std::map<CLI::App*, std::function<int()>> runners;
  for (const auto& c : murmur::tools::bench_commands()) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    runners[sub] = c.setup(*sub);
  }
  CLI11_PARSE(app, argc, argv);
  murmur::init_logging("bench", "warn");  // stderr: stdout is the table or the JSON lines
  try {
    for (auto& [sub, run] : runners) {
      if (sub->parsed()) return run();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "murmur-bench: %s\n", e.what());
    return 1;
  }
  return 2;
}
