#include "runtime/device_model.h"

#include <cstdlib>

#include <fmt/format.h>

#include "core/error.h"
#include "core/name_table.h"
#include "core/names.h"
#include "transport/world.h"

#ifdef MURMUR_WITH_CUDA
#include "device/cuda/cuda_device.h"
#include "device/cuda/memory.h"
#include "nn/cuda/context.h"
#include "nn/cuda/model.h"
#endif

namespace murmur::runtime {
namespace {

// The host model is the device model: nothing to copy. With an off-host device (staged_cpu),
// the arenas are the same host memory, but everything around them is done as for a GPU:
// transfers staged in pieces, the resume state copied around checkpoints.
class CpuModel final : public DeviceModel {
 public:
  explicit CpuModel(nn::Model& host, std::unique_ptr<device::Device> offhost = nullptr)
      : host_(host), offhost_(std::move(offhost)) {}
  device::Device& device() override { return offhost_ ? *offhost_ : device::cpu(); }
  std::span<float> params() override { return host_.params().flat(); }
  std::span<float> grads() override { return host_.grads().flat(); }
  float train_batch(const float* x, const std::int32_t* labels, int n, Rng& rng,
                    const std::function<void(std::size_t)>* grads_ready) override {
    return host_.train_batch(x, labels, n, rng, grads_ready);
  }
  Evaluation evaluate(const nn::Dataset& data, int batch_size) override {
    return runtime::evaluate(host_, data, batch_size);
  }
  void to_host(bool) override {}
  void to_device(bool) override {}
  std::string describe() const override { return offhost_ ? offhost_->describe() : "cpu"; }

 private:
  nn::Model& host_;
  std::unique_ptr<device::Device> offhost_;
};

#ifdef MURMUR_WITH_CUDA
// The model's twin on a GPU; the op table runs on the model's stream, so the optimizer's
// updates and the averaging are ordered with the training kernels without a sync. The host
// arena is pinned once so that the whole-arena copies around checkpoints are DMA.
class GpuModel final : public DeviceModel {
 public:
  GpuModel(nn::Model& host, int index)
      : host_(host),
        context_(index),
        device_(device::cuda::make_device(index, context_.stream())),
        pinned_(host.params().bytes()),
        model_(host, context_) {}

  device::Device& device() override { return *device_; }
  std::span<float> params() override { return {model_.params().data(), model_.params().floats()}; }
  std::span<float> grads() override { return {model_.grads().data(), model_.grads().floats()}; }
  float train_batch(const float* x, const std::int32_t* labels, int n, Rng& rng,
                    const std::function<void(std::size_t)>* grads_ready) override {
    // The layers' kernels are queued on one stream: the gradients are known final only once
    // the step has synchronized, so no exchange starts inside backward on a GPU.
    const float loss = model_.train_batch(x, labels, n, rng);
    if (grads_ready) (*grads_ready)(0);
    return loss;
  }
  Evaluation evaluate(const nn::Dataset& data, int batch_size) override {
    return evaluate_in_batches(data, batch_size, [&](const float* x, const std::int32_t* y, int n) {
      return model_.evaluate(x, y, n);
    });
  }
  void to_host(bool all) override {
    model_.params().copy_to_host(host_.params(), context_.stream());
    if (all) model_.buffers().copy_to_host(host_.buffers(), context_.stream());
    context_.synchronize();
  }
  void to_device(bool all) override {
    model_.params().copy_from_host(host_.params(), context_.stream());
    if (all) model_.buffers().copy_from_host(host_.buffers(), context_.stream());
    context_.synchronize();
  }
  std::string describe() const override {
    return fmt::format("{}, host arena {}", device_->describe(),
                       pinned_.registered() ? "pinned (cudaHostRegister)"
                                            : "pageable (pinning refused)");
  }

 private:
  nn::Model& host_;
  nn::cuda::Context context_;
  std::unique_ptr<device::Device> device_;  // on the context's stream
  nn::cuda::HostRegistration pinned_;       // unregistered before the host arena goes
  nn::cuda::CudaModel model_;
};
#endif

struct Entry {
  std::string_view name;
  std::unique_ptr<DeviceModel> (*make)(nn::Model& host, int rank);
};
constexpr Entry kDevices[] = {
    {"cpu", [](nn::Model& host, int) -> std::unique_ptr<DeviceModel> {
       return std::make_unique<CpuModel>(host);
     }},
    // The GPU path without a GPU: for tests, and to measure what staging costs.
    {"staged_cpu", [](nn::Model& host, int) -> std::unique_ptr<DeviceModel> {
       return std::make_unique<CpuModel>(host, device::make_offhost_cpu());
     }},
#ifdef MURMUR_WITH_CUDA
    {"cuda", [](nn::Model& host, int rank) -> std::unique_ptr<DeviceModel> {
       return std::make_unique<GpuModel>(host, device::cuda::device_for_local_rank(transport::local_rank(rank)));
     }},
#endif
};

const Entry* find(std::string_view name) {
  for (const Entry& e : kDevices) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

}  // namespace

std::vector<std::string_view> device_names() { return names_of(std::span<const Entry>(kDevices)); }

namespace {
// Every device murmur knows, built or not, so that a config naming cuda reaches check_device's
// message on how to get it instead of a bare "not one of cpu".
[[maybe_unused]] const bool kRegistered = register_names("run.device", {"cpu", "staged_cpu", "cuda"});
}  // namespace

void check_device(const ExperimentConfig& config) {
  if (find(config.run.device) != nullptr) return;
  throw ConfigError(fmt::format(
      "run.device: '{}' is not a device of this build ({}){}", config.run.device,
      fmt::join(device_names(), " | "),
      config.run.device == "cuda" ? "; configure with the CUDA toolkit installed, or "
                                    "-DMURMUR_WITH_CUDA=ON"
                                  : ""));
}

std::unique_ptr<DeviceModel> make_device_model(const ExperimentConfig& config, nn::Model& host,
                                               int rank) {
  check_device(config);
  return find(config.run.device)->make(host, rank);
}

}  // namespace murmur::runtime
