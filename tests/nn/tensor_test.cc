// nn::Shape and nn::Tensor: strides, batching, reshapes, bounds of rank.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "nn/tensor.h"

using murmur::nn::Shape;
using murmur::nn::Tensor;

TEST_CASE("Shape basics", "[tensor]") {
  Shape s{2, 3, 4};
  REQUIRE(s.rank() == 3);
  REQUIRE(s.numel() == 24);
  REQUIRE(s.str() == "[2, 3, 4]");
  REQUIRE(s.batched(5) == Shape{5, 2, 3, 4});
  REQUIRE(s.batched(5).sample() == s);
  REQUIRE(Shape{}.numel() == 1);
  REQUIRE_FALSE(s == Shape{2, 3});
  REQUIRE_THROWS_AS((Shape{1, 2, 3, 4, 5}), murmur::Error);
  REQUIRE_THROWS_AS((Shape{1, 2, 3, 4}.batched(2)), murmur::Error);
}

TEST_CASE("Tensor is a row-major view", "[tensor]") {
  float data[24];
  for (int i = 0; i < 24; ++i) data[i] = static_cast<float>(i);
  Tensor t(data, Shape{2, 3, 4});
  REQUIRE(t.strides[0] == 12);
  REQUIRE(t.strides[1] == 4);
  REQUIRE(t.strides[2] == 1);
  REQUIRE(t.numel() == 24);
  REQUIRE(t.rows() == 2);
  REQUIRE(t.row_size() == 12);
  REQUIRE(t.row(1)[0] == 12.0f);
  REQUIRE(t.contiguous());
  Tensor m = t.reshaped(Shape{6, 4});
  REQUIRE(m.at(5, 3) == 23.0f);
  REQUIRE(m.data == t.data);
  Tensor q(data, Shape{1, 2, 3, 4});
  REQUIRE(q.at(0, 1, 2, 3) == 23.0f);
  REQUIRE_THROWS_AS(t.reshaped(Shape{5, 5}), murmur::Error);
  // A strided (non-contiguous) view refuses to reshape.
  Tensor strided = m;
  strided.shape = Shape{6, 2};
  strided.strides = {4, 2, 0, 0};
  REQUIRE_FALSE(strided.contiguous());
  REQUIRE(strided.at(1, 1) == 6.0f);
  REQUIRE_THROWS_AS(strided.reshaped(Shape{12}), murmur::Error);
  REQUIRE_FALSE(Tensor().defined());
}
