// MURMUR_FAULT_KILL parsing: which rank dies after which step, and clear errors for bad specs.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "runtime/fault_injection.h"

namespace murmur::runtime {
namespace {

TEST_CASE("MURMUR_FAULT_KILL names the step after which a rank dies", "[faults]") {
  CHECK(fault_kill_step("", 2) == 0);
  CHECK(fault_kill_step("2:300", 2) == 300);
  CHECK(fault_kill_step("2:300", 1) == 0);
  CHECK(fault_kill_step("0:5,3:70", 3) == 70);
  CHECK_THROWS_AS(fault_kill_step("2", 2), ConfigError);
  CHECK_THROWS_AS(fault_kill_step("2:x", 2), ConfigError);
  CHECK_THROWS_AS(fault_kill_step("-1:4", 2), ConfigError);
  CHECK_THROWS_WITH(fault_kill_step("2:3:4", 2), Catch::Contains("MURMUR_FAULT_KILL"));
}

}  // namespace
}  // namespace murmur::runtime
