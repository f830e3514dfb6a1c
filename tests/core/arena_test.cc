// Arena and HostBuffer: layout, alignment, zero padding, names, clone_layout, errors.
#include <cstdint>

#include <catch2/catch.hpp>

#include "core/arena.h"
#include "core/error.h"
#include "core/host_memory.h"

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
