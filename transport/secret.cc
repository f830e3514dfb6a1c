#include "transport/secret.h"

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>

#include <spdlog/spdlog.h>

#include "core/error.h"

namespace murmur::transport {

std::string load_secret(const TransportConfig& config) {
  if (!config.secret_file.empty()) {
    std::ifstream in(config.secret_file, std::ios::binary);
    if (!in) {
      throw ConfigError("transport.secret_file: cannot read " + config.secret_file);
    }
    std::ostringstream text;
    text << in.rdbuf();
    std::string secret = text.str();
    // Files written by `echo` end in a newline that the other ranks' env variable lacks.
    while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
    return secret;
  }
  if (!config.secret_env.empty()) {
    if (const char* value = std::getenv(config.secret_env.c_str()); value && *value) return value;
  }
  static std::once_flag warned;
  std::call_once(warned, [] {
    spdlog::warn(
        "transport: no shared secret (transport.secret_file or $MURMUR_SECRET); any process that "
        "reaches the listening port can join");
  });
  return {};
}

}  // namespace murmur::transport
