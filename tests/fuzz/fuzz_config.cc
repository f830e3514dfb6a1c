// libFuzzer target: the config loader, which reads a YAML file and `--set key=value` overrides
// from the command line. Input: YAML text, then optional overrides, each after a NUL byte. Every
// fault must be a ConfigError; a config that loads must survive validate() or fail it with a
// ConfigError, and must write out (to_yaml, as murmur-peer writes config.yaml into the run
// directory) to text that loads back to the same config.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  for (std::size_t at = 0;;) {
    const std::size_t nul = input.find('\0', at);
    parts.push_back(input.substr(at, nul == std::string_view::npos ? std::string_view::npos : nul - at));
    if (nul == std::string_view::npos) break;
    at = nul + 1;
  }
  murmur::ExperimentConfig config;
  try {
    config = murmur::load_config_string(parts[0], "fuzz.yaml");
    for (std::size_t i = 1; i < parts.size(); ++i) murmur::apply_override(config, parts[i]);
  } catch (const murmur::ConfigError&) {
    return 0;
  }
  try {
    murmur::validate(config);
  } catch (const murmur::ConfigError&) {
  }
  const nlohmann::json before = murmur::to_json(config);
  const std::string yaml = murmur::to_yaml(config);
  murmur::ExperimentConfig again;
  try {
    again = murmur::load_config_string(yaml, "written.yaml");
  } catch (const murmur::ConfigError& e) {
    std::fprintf(stderr, "the written config does not load: %s\n%s", e.what(), yaml.c_str());
    std::abort();
  }
  if (murmur::to_json(again) != before) {
    std::fprintf(stderr, "the written config loads differently:\n%s", yaml.c_str());
    std::abort();
  }
  return 0;
}
