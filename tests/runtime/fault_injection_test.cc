// MURMUR_FAULT_KILL and MURMUR_FAULT_STALL parsing: which rank dies (or stalls) after which step,
// and clear errors for bad specs.
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

TEST_CASE("MURMUR_FAULT_STALL names a rank's step and pause", "[faults]") {
  CHECK(fault_stall("", 1).step == 0);
  CHECK(fault_stall("1:5:6000", 1).step == 5);
  CHECK(fault_stall("1:5:6000", 1).pause == std::chrono::milliseconds(6000));
  CHECK(fault_stall("1:5:6000", 0).step == 0);
  CHECK(fault_stall("0:1:2,3:40:100", 3).pause == std::chrono::milliseconds(100));
  CHECK_THROWS_AS(fault_stall("1:5", 1), ConfigError);
  CHECK_THROWS_AS(fault_stall("1:5:x", 1), ConfigError);
  CHECK_THROWS_AS(fault_stall("1:5:6:7", 1), ConfigError);
  CHECK_THROWS_WITH(fault_stall("1::6", 1), Catch::Contains("MURMUR_FAULT_STALL"));
}

}  // namespace
}  // namespace murmur::runtime
