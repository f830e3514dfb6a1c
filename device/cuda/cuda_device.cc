#include "device/cuda/cuda_device.h"

#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "device/cuda/check.h"
#include "device/cuda/memory.h"
#include "device/cuda/ops.h"

namespace murmur::device::cuda {
namespace {

// An event recorded on the stream after the copy it guards.
class EventFence final : public Fence {
 public:
  explicit EventFence(cudaStream_t stream) { event_.record(stream); }
  bool ready() override {
    const cudaError_t status = cudaEventQuery(event_.get());
    if (status == cudaErrorNotReady) return false;
    MURMUR_CUDA_CHECK(status);
    return true;
  }
  void wait() override { event_.synchronize(); }

 private:
  Event event_;
};

void check_same(std::size_t a, std::size_t b, const char* op) {
  if (a != b) throw Error(fmt::format("device::cuda {}: arrays of different sizes ({} and {})", op, a, b));
}

std::int64_t len(std::span<const float> x) { return static_cast<std::int64_t>(x.size()); }

class CudaDevice final : public Device {
 public:
  CudaDevice(int index, cudaStream_t stream) : index_(index) {
    MURMUR_CUDA_CHECK(cudaSetDevice(index_));
    if (stream == nullptr) {
      own_ = std::make_unique<Stream>();
      stream = own_->get();
    }
    stream_ = stream;
  }

  int index() const { return index_; }
  std::string describe() const override {
    return fmt::format("cuda:{} {}", index_, device_name(index_));
  }
  bool host_memory() const override { return false; }

  Array zeros(std::size_t floats) override {
    auto buffer = std::make_shared<DeviceBuffer>(floats * sizeof(float));
    return Array({buffer->floats(), floats}, buffer);
  }
  Array staging(std::size_t floats) override {
    auto buffer = std::make_shared<PinnedBuffer>(floats * sizeof(float));
    if (floats > 0) std::memset(buffer->data(), 0, floats * sizeof(float));
    return Array({static_cast<float*>(buffer->data()), floats}, buffer);
  }

  void download(std::span<float> host, std::span<const float> mine) override {
    download_async(host, mine)->wait();
  }
  void upload(std::span<float> mine, std::span<const float> host) override {
    upload_async(mine, host)->wait();
  }
  std::unique_ptr<Fence> download_async(std::span<float> host, std::span<const float> mine) override {
    check_same(host.size(), mine.size(), "download");
    MURMUR_CUDA_CHECK(cudaMemcpyAsync(host.data(), mine.data(), mine.size_bytes(),
                                      cudaMemcpyDeviceToHost, stream_));
    return std::make_unique<EventFence>(stream_);
  }
  std::unique_ptr<Fence> upload_async(std::span<float> mine, std::span<const float> host) override {
    check_same(host.size(), mine.size(), "upload");
    MURMUR_CUDA_CHECK(cudaMemcpyAsync(mine.data(), host.data(), host.size_bytes(),
                                      cudaMemcpyHostToDevice, stream_));
    return std::make_unique<EventFence>(stream_);
  }
  void synchronize() override { MURMUR_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  void fill(std::span<float> x, float v) override { cuda::fill(x.data(), v, len(x), stream_); }
  void copy(std::span<float> out, std::span<const float> x) override {
    check_same(out.size(), x.size(), "copy");
    if (x.empty() || out.data() == x.data()) return;
    MURMUR_CUDA_CHECK(cudaMemcpyAsync(out.data(), x.data(), x.size_bytes(),
                                      cudaMemcpyDeviceToDevice, stream_));
  }
  void scale(std::span<float> x, float a) override { cuda::scale(x.data(), a, len(x), stream_); }
  void axpy(std::span<float> y, float a, std::span<const float> x) override {
    check_same(y.size(), x.size(), "axpy");
    cuda::axpy(y.data(), a, x.data(), len(y), stream_);
  }
  void axpby(std::span<float> y, float a, std::span<const float> x, float b) override {
    check_same(y.size(), x.size(), "axpby");
    cuda::axpby(y.data(), a, x.data(), b, len(y), stream_);
  }
  void add_scaled_diff(std::span<float> y, float a, std::span<const float> u,
                       std::span<const float> v) override {
    check_same(y.size(), u.size(), "add_scaled_diff");
    check_same(y.size(), v.size(), "add_scaled_diff");
    cuda::add_scaled_diff(y.data(), a, u.data(), v.data(), len(y), stream_);
  }
  void mix(std::span<float> x, float self, std::span<const float* const> inputs,
           std::span<const float> weights) override {
    cuda::mix(x.data(), len(x), self, inputs, weights, stream_);
  }
  double squared_distance(std::span<const float> x, std::span<const float> y) override {
    check_same(x.size(), y.size(), "squared_distance");
    return cuda::squared_distance(x.data(), y.data(), len(x), stream_);
  }
  void sgd_step(std::span<float> params, std::span<const float> grads, std::span<float> buffer,
                const SgdStep& s) override {
    check_same(params.size(), grads.size(), "sgd_step");
    if (s.momentum != 0.0f) check_same(params.size(), buffer.size(), "sgd_step (momentum buffer)");
    cuda::sgd_step(params.data(), grads.data(), buffer.empty() ? nullptr : buffer.data(),
                   len(params), s, stream_);
  }
  void adamw_step(std::span<float> params, std::span<const float> grads, std::span<float> m,
                  std::span<float> v, const AdamWStep& a) override {
    check_same(params.size(), grads.size(), "adamw_step");
    check_same(params.size(), m.size(), "adamw_step (exp_avg)");
    check_same(params.size(), v.size(), "adamw_step (exp_avg_sq)");
    cuda::adamw_step(params.data(), grads.data(), m.data(), v.data(), len(params), a, stream_);
  }

 private:
  int index_;
  std::unique_ptr<Stream> own_;  // when the caller gave no stream
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<Device> make_device(int index, cudaStream_t stream) {
  return std::make_unique<CudaDevice>(index, stream);
}

int index_of(const Device& device) {
  const auto* cuda = dynamic_cast<const CudaDevice*>(&device);
  if (cuda == nullptr) throw Error("device::cuda::index_of: not a CUDA device");
  return cuda->index();
}

}  // namespace murmur::device::cuda
