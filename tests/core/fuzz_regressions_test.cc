// Inputs that tools/fuzz (tests/fuzz) found to break a reader of core/, kept here so the normal
// suite fails if the bug comes back. Each case names the fuzz target that found it.
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/error.h"

using murmur::ConfigError;
using murmur::ExperimentConfig;

// fuzz_config: `--set run.name=<bytes that are not UTF-8>` loaded, and then to_json(config).dump()
// (config.json, summary.json) threw nlohmann's type_error 316, and to_yaml() wrote text that
// loaded back as another name.
TEST_CASE("config strings must be valid UTF-8", "[config][fuzz]") {
  ExperimentConfig c;
  CHECK_THROWS_AS(murmur::apply_override(c, "run.name=\x89\x05" "abc"), ConfigError);
  CHECK_THROWS_WITH(murmur::load_config_string("run:\n  name: \"a\xff\"\n", "run.yaml"),
                    "run.yaml:2: run.name: not valid UTF-8 text");
  // Overlong forms and surrogates are not UTF-8 either.
  CHECK_THROWS_AS(murmur::apply_override(c, "run.name=\xc0\xaf"), ConfigError);
  CHECK_THROWS_AS(murmur::apply_override(c, "run.name=\xed\xa0\x80"), ConfigError);
  CHECK_THROWS_AS(murmur::apply_override(c, "run.name=\xf4\x90\x80\x80"), ConfigError);
  CHECK(c.run.name == ExperimentConfig{}.run.name);  // all or nothing
  // A UTF-16 byte-order mark: yaml-cpp would transcode the rest into other text (found by
  // tools/fuzz: the written config then loaded differently).
  CHECK_THROWS_AS(murmur::apply_override(c, "run.name=\xfe\xff\xff\xb3gome=x"),
                  ConfigError);
  CHECK_THROWS_AS(murmur::load_config_string(std::string("\xff\xfer\0u\0n\0", 8), "run.yaml"),
                  ConfigError);

  // Real UTF-8 passes, survives JSON and reads back from the written YAML.
  murmur::apply_override(c, "run.name=\xc3\xa9t\xc3\xa9-\xe6\x98\x9f-\xf0\x9f\x90\xa6");
  CHECK(c.run.name == "\xc3\xa9t\xc3\xa9-\xe6\x98\x9f-\xf0\x9f\x90\xa6");
  CHECK_NOTHROW(murmur::to_json(c).dump());
  CHECK(murmur::load_config_string(murmur::to_yaml(c), "written.yaml").run.name == c.run.name);
}
