#include "core/logging.h"

#include <unistd.h>

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "core/error.h"

namespace murmur {
namespace {

std::mutex g_mutex;  // guards g_logger, g_retired and g_pattern
std::shared_ptr<spdlog::logger> g_logger;
// Loggers replaced by a later init_logging() stay alive: a thread may still hold log()'s reference.
std::vector<std::shared_ptr<spdlog::logger>> g_retired;
std::string g_pattern;

spdlog::level::level_enum parse_level(std::string_view level) {
  constexpr std::array<std::pair<std::string_view, spdlog::level::level_enum>, 7> kLevels = {{
      {"trace", spdlog::level::trace},
      {"debug", spdlog::level::debug},
      {"info", spdlog::level::info},
      {"warn", spdlog::level::warn},
      {"error", spdlog::level::err},
      {"critical", spdlog::level::critical},
      {"off", spdlog::level::off},
  }};
  for (const auto& [name, value] : kLevels) {
    if (name == level) return value;
  }
  throw ConfigError(fmt::format("unknown log level \"{}\" (known: trace, debug, info, warn, error, "
                                "critical, off)", level));
}

// spdlog reads '%' in a pattern as a flag; a tag is literal text.
std::string escape_pattern(std::string_view text) {
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '%') out += '%';
  }
  return out;
}

std::shared_ptr<spdlog::logger> make_logger(std::string_view tag, spdlog::level::level_enum level) {
  // Colors only on a terminal: a log file or a pipe to the launcher gets plain text.
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>(
      ::isatty(STDERR_FILENO) ? spdlog::color_mode::automatic : spdlog::color_mode::never);
  auto logger = std::make_shared<spdlog::logger>("murmur", std::move(sink));
  g_pattern = fmt::format("[%Y-%m-%d %H:%M:%S.%e] [{}] [%^%l%$] %v", escape_pattern(tag));
  logger->set_pattern(g_pattern);
  logger->set_level(level);
  logger->flush_on(spdlog::level::warn);
  return logger;
}

}  // namespace

void init_logging(std::string_view tag, std::string_view level) {
  const auto parsed = parse_level(level);
  std::lock_guard lock(g_mutex);
  if (g_logger) g_retired.push_back(std::move(g_logger));
  g_logger = make_logger(tag, parsed);
  // spdlog's free functions (spdlog::warn, as the transport's rooms call them) write through
  // the default logger, which is stdout's until replaced: there they broke --json output and
  // missed the tag and the log file.
  spdlog::set_default_logger(g_logger);
}

void add_log_file(const std::filesystem::path& file) {
  std::shared_ptr<spdlog::sinks::sink> sink;
  try {
    sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file.string(), /*truncate=*/false);
  } catch (const spdlog::spdlog_ex& e) {
    throw IoError(fmt::format("{}: cannot open log file: {}", file.string(), e.what()));
  }
  log();  // make sure a logger exists
  std::lock_guard lock(g_mutex);
  sink->set_pattern(g_pattern);
  g_logger->sinks().push_back(std::move(sink));
}

spdlog::logger& log() {
  std::lock_guard lock(g_mutex);
  if (!g_logger) {
    g_logger = make_logger("murmur", spdlog::level::info);
    spdlog::set_default_logger(g_logger);
  }
  return *g_logger;
}

}  // namespace murmur
