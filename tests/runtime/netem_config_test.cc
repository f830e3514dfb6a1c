// The `network:` section: tc-style strings checked before anything starts, and the
// `stragglers: {rank: factor}` mapping read, range-checked, overridden and written back.
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/error.h"

using murmur::ConfigError;
using murmur::load_config_string;

namespace {

std::string error_of(const std::string& yaml) {
  try {
    validate(load_config_string(yaml, "net.yaml"));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("network: the issue's form is read, and written back the same", "[config][netem]") {
  const auto c = load_config_string(
      "world: {size: 4}\nnetwork: {bandwidth: 1gbit, latency: 2ms, stragglers: {3: 2.0}}\n", "net.yaml");
  CHECK(c.network.bandwidth == "1gbit");
  CHECK(c.network.latency == "2ms");
  REQUIRE(c.network.stragglers.size() == 1);
  CHECK(c.network.stragglers.at(3) == 2.0);
  CHECK_NOTHROW(validate(c));

  const auto again = load_config_string(murmur::to_yaml(c), "resolved.yaml");
  CHECK(again.network.stragglers == c.network.stragglers);
  CHECK(again.network.bandwidth == "1gbit");
  const nlohmann::json j = murmur::to_json(c);
  CHECK(j["network"]["stragglers"]["3"] == 2.0);  // JSON keys are strings
}

TEST_CASE("network: --set replaces the stragglers", "[config][netem]") {
  auto c = load_config_string("world: {size: 8}\n", "net.yaml");
  murmur::apply_override(c, "network.stragglers={1: 3, 7: 1.5}");
  CHECK(c.network.stragglers == std::map<int, double>{{1, 3.0}, {7, 1.5}});
  murmur::apply_override(c, "network.stragglers={}");
  CHECK(c.network.stragglers.empty());
  CHECK_THROWS_WITH(murmur::apply_override(c, "network.stragglers=[1]"),
                    Catch::Contains("expected a mapping"));
}

TEST_CASE("network: bad values are one clear error each", "[config][netem]") {
  CHECK_THROWS_WITH(load_config_string("network: {stragglers: {x: 2}}\n", "net.yaml"),
                    Catch::Contains("net.yaml:1: network.stragglers.x: expected an integer"));
  CHECK_THROWS_WITH(load_config_string("network: {stragglers: {-1: 2}}\n", "net.yaml"),
                    Catch::Contains("non-negative"));
  CHECK_THROWS_WITH(load_config_string("network: {stragglers: {1: 0.5}}\n", "net.yaml"),
                    Catch::Contains("network.stragglers.1: 0.5 is out of range [1, 1e+06]"));
  CHECK(error_of("world: {size: 4}\nnetwork: {stragglers: {4: 2}}\n")
            .find("rank 4 is not below world.size 4") != std::string::npos);
  CHECK(error_of("network: {bandwidth: fast}\n").find("network.bandwidth: \"fast\"") != std::string::npos);
  CHECK(error_of("network: {bandwidth: 1gbps}\n").find("network.bandwidth") != std::string::npos);
  CHECK(error_of("network: {latency: 5}\n").find("network.latency") != std::string::npos);
  CHECK(error_of("network: {jitter: 1ms}\n").find("needs network.latency") != std::string::npos);
  CHECK(error_of("network: {loss: 1}\n").find("network.loss") != std::string::npos);
  CHECK(error_of("network: {bandwidth: 100mbit, latency: 0.1ms, jitter: 20us, loss: 0.5%}\n").empty());
  CHECK(error_of("eval: {target_accuracy: 0.87}\n").empty());
  CHECK(error_of("network: {straggler_mode: nap}\n")
            .find("network.straggler_mode: \"nap\" is neither quota nor sleep") != std::string::npos);
  for (const char* steps : {"[5]", "[0, 5]", "[5, 5]", "[6, 5]", "[1, 2, 3]"}) {
    CHECK(error_of(std::string("network: {straggler_steps: ") + steps + "}\n")
              .find("network.straggler_steps: expected [from, to]") != std::string::npos);
  }
  CHECK(error_of("world: {size: 2}\nnetwork: {stragglers: {1: 2}, straggler_mode: sleep, straggler_steps: [10, 20]}\n")
            .empty());
  CHECK_THROWS_WITH(load_config_string("eval: {target_accuracy: 87}\n", "net.yaml"),
                    Catch::Contains("out of range"));
}
