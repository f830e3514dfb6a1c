// The op table on the host (device/cpu.cc): each op's arithmetic against a hand computation, the
// off-host CPU device (what tests stand a GPU with) bitwise equal to cpu() on every op, and a
// size mismatch refused.
#include <catch2/catch.hpp>

#include <vector>

#include "core/error.h"
#include "device/device.h"
#include "tests/device/ops_check.h"

namespace murmur::device {
namespace {

TEST_CASE("cpu ops compute what they say", "[device]") {
  Device& cpu = device::cpu();
  CHECK(cpu.host_memory());
  Array x = cpu.zeros(4);
  CHECK(x.size() == 4);
  CHECK(x.span()[3] == 0.0f);
  std::vector<float> a{1, 2, 3, 4}, b{10, 20, 30, 40};
  cpu.copy(x.span(), a);
  cpu.axpy(x.span(), 2.0f, b);  // 21 42 63 84
  CHECK(x.span()[1] == 42.0f);
  cpu.axpby(x.span(), 1.0f, a, 0.5f);  // a + x/2 = 11.5 23 34.5 46
  CHECK(x.span()[2] == 34.5f);
  cpu.add_scaled_diff(x.span(), 0.5f, b, a);  // + (b - a)/2 = 16 32 48 64
  CHECK(x.span()[3] == 64.0f);
  cpu.scale(x.span(), 0.25f);  // 4 8 12 16
  const float* inputs[] = {a.data(), b.data()};
  const float weights[] = {1.0f, 0.1f};
  cpu.mix(x.span(), 0.5f, inputs, weights);  // 2 + 1 + 1 = 4, 4 + 2 + 2 = 8, ...
  CHECK(x.span()[0] == 4.0f);
  CHECK(x.span()[1] == 8.0f);
  CHECK(cpu.squared_distance(a, b) == 81 + 324 + 729 + 1296);
  cpu.fill(x.span(), -1.0f);
  CHECK(x.span()[2] == -1.0f);
  std::vector<float> three(3);
  CHECK_THROWS_AS(cpu.copy(x.span(), three), Error);
  CHECK_THROWS_AS(cpu.axpy(x.span(), 1.0f, three), Error);
}

TEST_CASE("the off-host cpu device is bitwise the cpu on every op", "[device]") {
  auto offhost = make_offhost_cpu();
  CHECK_FALSE(offhost->host_memory());
  testing::check_ops(*offhost, 3001, [](const std::string& what, std::span<const float> got,
                                        std::span<const float> want) {
    INFO(what);
    CHECK(std::vector<float>(got.begin(), got.end()) == std::vector<float>(want.begin(), want.end()));
  });
}

}  // namespace
}  // namespace murmur::device
