// Tensor: a non-owning float view with a shape of rank <= 4 and strides in elements (row-major
// contiguous unless built otherwise). Layers pass activations as [batch, ...] tensors whose
// memory Sequential owns; parameters are views into the Arena. Copying a Tensor copies the
// view, never the data. Shapes live inline (no heap), so building views costs nothing per step.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include <fmt/format.h>

#include "core/error.h"

namespace murmur::nn {

class Shape {
 public:
  static constexpr int kMaxRank = 4;

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims) {
    if (dims.size() > kMaxRank) throw Error("nn::Shape: rank > 4");
    for (std::int64_t d : dims) dims_[rank_++] = d;
  }

  int rank() const { return rank_; }
  std::int64_t operator[](int i) const { return dims_[i]; }
  std::int64_t& operator[](int i) { return dims_[i]; }
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= dims_[i];
    return n;
  }
  // This shape with `n` prepended (a batch of samples of this shape).
  Shape batched(std::int64_t n) const {
    Shape s;
    s.rank_ = rank_ + 1;
    if (s.rank_ > kMaxRank) throw Error("nn::Shape: rank > 4");
    s.dims_[0] = n;
    for (int i = 0; i < rank_; ++i) s.dims_[i + 1] = dims_[i];
    return s;
  }
  // This shape without its first dimension (one sample of a batch).
  Shape sample() const {
    Shape s;
    s.rank_ = rank_ > 0 ? rank_ - 1 : 0;
    for (int i = 0; i < s.rank_; ++i) s.dims_[i] = dims_[i + 1];
    return s;
  }
  bool operator==(const Shape& o) const {
    if (rank_ != o.rank_) return false;
    for (int i = 0; i < rank_; ++i)
      if (dims_[i] != o.dims_[i]) return false;
    return true;
  }
  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < rank_; ++i) s += fmt::format("{}{}", i ? ", " : "", dims_[i]);
    return s + "]";
  }

 private:
  std::array<std::int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

struct Tensor {
  float* data = nullptr;
  Shape shape;
  std::array<std::int64_t, Shape::kMaxRank> strides{};

  Tensor() = default;
  // A row-major contiguous view of `shape` at `data`.
  Tensor(float* d, const Shape& s) : data(d), shape(s) {
    std::int64_t stride = 1;
    for (int i = s.rank() - 1; i >= 0; --i) {
      strides[i] = stride;
      stride *= s[i];
    }
  }

  bool defined() const { return data != nullptr; }
  int rank() const { return shape.rank(); }
  std::int64_t dim(int i) const { return shape[i]; }
  std::int64_t numel() const { return shape.numel(); }
  // For a [n, ...] batch: n, and the floats per sample.
  std::int64_t rows() const { return shape.rank() > 0 ? shape[0] : 1; }
  std::int64_t row_size() const { return shape.rank() > 0 ? numel() / shape[0] : 1; }
  bool contiguous() const { return Tensor(data, shape).strides == strides; }

  std::span<float> span() const { return {data, static_cast<std::size_t>(numel())}; }
  float* row(std::int64_t i) const { return data + i * strides[0]; }
  float& at(std::int64_t i) const { return data[i * strides[0]]; }
  float& at(std::int64_t i, std::int64_t j) const { return data[i * strides[0] + j * strides[1]]; }
  float& at(std::int64_t i, std::int64_t j, std::int64_t k, std::int64_t l) const {
    return data[i * strides[0] + j * strides[1] + k * strides[2] + l * strides[3]];
  }
  // The same memory seen with another shape of equal numel (contiguous tensors only).
  Tensor reshaped(const Shape& s) const {
    if (s.numel() != numel() || !contiguous())
      throw Error(fmt::format("nn::Tensor: cannot reshape {} to {}", shape.str(), s.str()));
    return Tensor(data, s);
  }
};

}  // namespace murmur::nn
