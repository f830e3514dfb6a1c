// Process-wide logging on spdlog: every line carries a time, this process's tag ("peer 3")
// and the level, and goes to stderr (and, once add_log_file() is called, to a file in the run
// directory). Call init_logging() and add_log_file() from main before starting threads;
// log() may then be used from any thread.
#pragma once

#include <filesystem>
#include <string_view>

#include <spdlog/spdlog.h>

namespace murmur {

// (Re)creates the logger. `level` is one of trace, debug, info, warn, error, critical, off;
// anything else throws ConfigError.
void init_logging(std::string_view tag, std::string_view level = "info");

// Also writes every line to `file` (appending). Throws IoError if it cannot be opened.
void add_log_file(const std::filesystem::path& file);

// The logger; before init_logging() it is one tagged "murmur" at level info.
spdlog::logger& log();

}  // namespace murmur
