#include "transport/float_ops.h"

#include <algorithm>
#include <vector>

namespace murmur::transport {
namespace {

class HostFloatOps final : public FloatOps {
 public:
  Scratch scratch(Transport& transport, std::size_t floats) override {
    auto storage = std::make_shared<std::vector<float>>(floats, 0.0f);
    Scratch s;
    s.owner = storage;
    s.floats = std::span<float>(*storage);
    s.region = transport.register_region(std::as_writable_bytes(s.floats));
    return s;
  }
  void add(std::span<float> acc, std::span<const float> in) override {
    float* __restrict x = acc.data();
    const float* __restrict y = in.data();
    for (std::size_t i = 0, n = acc.size(); i < n; ++i) x[i] += y[i];
  }
  void scale(std::span<float> x, float a) override {
    for (float& v : x) v *= a;
  }
  void copy(std::span<float> out, std::span<const float> in) override {
    std::copy(in.begin(), in.end(), out.begin());
  }
};

}  // namespace

FloatOps& host_float_ops() {
  static HostFloatOps ops;
  return ops;
}

}  // namespace murmur::transport
