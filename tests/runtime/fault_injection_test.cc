// MURMUR_FAULT_KILL and MURMUR_FAULT_STALL parsing: which rank dies (or stalls) after which step,
// and clear errors for bad specs.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "runtime/fault_injection.h"

namespace murmur::runtime {
namespace {

TEST_CASE("MURMUR_FAULT_KILL names the step after which a rank dies, and a delay", "[faults]") {
  CHECK(fault_kill("", 2).step == 0);
  CHECK(fault_kill("2:300", 2).step == 300);
  CHECK(fault_kill("2:300", 2).delay == std::chrono::microseconds(0));
  CHECK(fault_kill("2:300", 1).step == 0);
  CHECK(fault_kill("0:5,3:70", 3).step == 70);
  CHECK(fault_kill("2:300:1500", 2).step == 300);
  CHECK(fault_kill("2:300:1500", 2).delay == std::chrono::microseconds(1500));
  CHECK(fault_kill("1:4:9,2:300", 1).delay == std::chrono::microseconds(9));
  CHECK_THROWS_AS(fault_kill("2", 2), ConfigError);
  CHECK_THROWS_AS(fault_kill("2:x", 2), ConfigError);
  CHECK_THROWS_AS(fault_kill("-1:4", 2), ConfigError);
  CHECK_THROWS_AS(fault_kill("2:3:-4", 2), ConfigError);
  CHECK_THROWS_WITH(fault_kill("2:3:4:5", 2), Catch::Contains("MURMUR_FAULT_KILL"));
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

TEST_CASE("MURMUR_FAULT_FREEZE names a rank's step and pause", "[faults]") {
  CHECK(fault_freeze("1:5:6000", 1).step == 5);
  CHECK(fault_freeze("1:5:6000", 1).pause == std::chrono::milliseconds(6000));
  CHECK(fault_freeze("1:5:6000", 2).step == 0);
  CHECK_THROWS_WITH(fault_freeze("1:5", 1), Catch::Contains("MURMUR_FAULT_FREEZE"));
  CHECK(fault_hooks("", "", "1:5:6000", 1).size() == 1);
  CHECK(fault_hooks("1:2", "1:3:4", "1:5:6000", 1).size() == 3);
  CHECK(fault_hooks("1:2", "1:3:4", "1:5:6000", 0).empty());
}

}  // namespace
}  // namespace murmur::runtime
