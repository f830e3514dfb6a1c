// Arena and HostBuffer: layout, alignment, huge pages, zero padding, names, clone_layout, errors.
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "core/arena.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "tests/skip.h"

using murmur::Arena;
using murmur::HostBuffer;

TEST_CASE("HostBuffer is zeroed, aligned and movable", "[arena]") {
  HostBuffer b = HostBuffer::floats(1000);
  REQUIRE(b.size() == 4000);
  REQUIRE(reinterpret_cast<std::uintptr_t>(b.data()) % 256 == 0);
  for (float v : b.as_floats()) REQUIRE(v == 0.0f);
  b.as_floats()[3] = 5;
  const std::byte* p = b.data();
  HostBuffer moved = std::move(b);
  REQUIRE(moved.data() == p);
  REQUIRE(b.data() == nullptr);
  REQUIRE(b.size() == 0);
  REQUIRE(moved.as_floats()[3] == 5.0f);
  HostBuffer empty(0);
  REQUIRE(empty.empty());
  REQUIRE(empty.as_floats().empty());
}

// The VmFlags of the mapping that holds `p` in /proc/self/smaps ("" if none does).
std::string vm_flags_at(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " ", &lo, &hi) == 2 &&
        line.find(':') > line.find(' ')) {
      inside = lo <= at && at < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

TEST_CASE("A HostBuffer of a huge page or more is aligned to one and asks for huge pages", "[arena]") {
  REQUIRE(HostBuffer::alignment_for(HostBuffer::kHugePage - 1) == HostBuffer::kAlignment);
  REQUIRE(HostBuffer::alignment_for(HostBuffer::kHugePage) == HostBuffer::kHugePage);
  HostBuffer b(HostBuffer::kHugePage + 12345);
  REQUIRE(b.size() == HostBuffer::kHugePage + 12345);
  REQUIRE(reinterpret_cast<std::uintptr_t>(b.data()) % HostBuffer::kHugePage == 0);
  for (std::byte v : b.bytes()) REQUIRE(v == std::byte{0});
  HostBuffer small = HostBuffer::floats(1000);
  if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled")) {
    MURMUR_SKIP("this kernel has no transparent huge pages (no /sys/kernel/mm/transparent_hugepage)");
  }
  // "hg": the mapping was madvised MADV_HUGEPAGE. Whether the kernel found free huge pages for
  // it depends on the machine's fragmentation, so the advice is what is checked.
  const std::string flags = vm_flags_at(b.data());
  INFO(flags);
  REQUIRE(flags.find(" hg") != std::string::npos);
  REQUIRE(vm_flags_at(small.data()).find(" hg") == std::string::npos);
}

TEST_CASE("Arena lays tensors on 256-byte boundaries with zero padding", "[arena]") {
  Arena a;
  REQUIRE(a.declare("fc1.weight", {3, 5}) == 0);
  REQUIRE(a.declare("fc1.bias", {3}) == 1);
  REQUIRE(a.declare("fc2.weight", {100}) == 2);
  REQUIRE_FALSE(a.allocated());
  a.allocate();
  REQUIRE(a.allocated());
  const auto& e = a.entries();
  REQUIRE(e[0].offset == 0);
  REQUIRE(e[0].numel == 15);
  REQUIRE(e[1].offset == 64);
  REQUIRE(e[2].offset == 128);
  REQUIRE(a.flat().size() == 128 + 128);
  REQUIRE(a.bytes().size() == a.flat().size() * 4);
  REQUIRE(a.num_elements() == 118);
  for (std::size_t i = 0; i < a.size(); ++i)
    REQUIRE(reinterpret_cast<std::uintptr_t>(a.view(i).data()) % 256 == 0);
  REQUIRE(a.view("fc1.bias").data() == a.flat().data() + 64);
  REQUIRE(a.view("fc1.bias").size() == 3);
  for (float& v : a.view("fc1.weight")) v = 1;
  for (float& v : a.view("fc1.bias")) v = 2;
  // Writing every view leaves the padding as it was: zero.
  for (std::size_t i = 15; i < 64; ++i) REQUIRE(a.flat()[i] == 0.0f);
  for (std::size_t i = 67; i < 128; ++i) REQUIRE(a.flat()[i] == 0.0f);
  REQUIRE(*a.find("fc2.weight") == 2);
  REQUIRE_FALSE(a.find("nope"));
}

TEST_CASE("Arena clone_layout copies the layout, not the values", "[arena]") {
  Arena a;
  a.declare("w", {2, 2});
  a.declare("b", {2});
  a.allocate();
  a.view("w")[0] = 3;
  Arena g = a.clone_layout();
  REQUIRE(g.allocated());
  REQUIRE(g.flat().size() == a.flat().size());
  REQUIRE(g.flat().data() != a.flat().data());
  REQUIRE(g.view("w")[0] == 0.0f);
  REQUIRE_NOTHROW(a.check_same_layout(g));
  Arena other;
  other.declare("w", {4});
  other.declare("b", {2});
  other.allocate();
  REQUIRE_THROWS_AS(a.check_same_layout(other), murmur::Error);
  // Views survive a move of the arena (the buffer moves, not the floats).
  float* before = a.view("b").data();
  Arena moved = std::move(a);
  REQUIRE(moved.view("b").data() == before);
}

TEST_CASE("Arena rejects misuse", "[arena]") {
  Arena a;
  a.declare("x", {2});
  REQUIRE_THROWS_AS(a.declare("x", {3}), murmur::Error);
  REQUIRE_THROWS_AS(a.declare("", {3}), murmur::Error);
  REQUIRE_THROWS_AS(a.declare("y", {-1}), murmur::Error);
  REQUIRE_THROWS_AS(a.view(0), murmur::Error);
  a.allocate();
  REQUIRE_THROWS_AS(a.allocate(), murmur::Error);
  REQUIRE_THROWS_AS(a.declare("z", {1}), murmur::Error);
  REQUIRE_THROWS_AS(a.view(1), murmur::Error);
  REQUIRE_THROWS_AS(a.view("nope"), murmur::Error);
  Arena empty;
  empty.allocate();
  REQUIRE(empty.flat().empty());
}
