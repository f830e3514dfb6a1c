#include "runtime/cuda_trainer.h"

#include <algorithm>
#include <cstdlib>
#include <span>

#include <fmt/format.h>

#include "core/error.h"

#ifdef MURMUR_WITH_CUDA
#include "nn/cuda/check.h"
#include "nn/cuda/context.h"
#include "nn/cuda/device.h"
#include "nn/cuda/model.h"
#include "nn/cuda/optimizer.h"
#include "runtime/cuda_stager.h"
#endif

namespace murmur::runtime {

void check_device(const ExperimentConfig& config) {
#ifndef MURMUR_WITH_CUDA
  if (config.run.device == "cuda") {
    throw ConfigError(
        "run.device: cuda, but this murmur was built without CUDA (configure with the CUDA "
        "toolkit installed, or -DMURMUR_WITH_CUDA=ON)");
  }
#endif
}

#ifdef MURMUR_WITH_CUDA
namespace {

int local_rank(int rank) {
  for (const char* name : {"MURMUR_LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"}) {
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') return std::atoi(v);
  }
  return rank;
}

// Parameters cross between the device arena and the host arena as one cudaMemcpy each way.
// The host arena is registered (pinned) once, so those copies are DMA at full bandwidth with no
// staging copy; the averaging algorithm then works on the host arena as on the CPU path.
class CudaTrainer : public DeviceTrainer {
 public:
  CudaTrainer(const ExperimentConfig& config, nn::Model& host,
              optimizers::LocalOptimizer& host_optimizer, int device)
      : host_(host), host_optimizer_(host_optimizer), context_(device),
        pinned_(host.params().bytes()), model_(host, context_),
        optimizer_(config.train.optimizer, host.params().flat().size()) {
    to_device(true);  // a resumed host optimizer's state, if any
  }

  float step(const float* x, const std::int32_t* labels, int n, Rng& rng, float lr) override {
    const float loss = model_.train_batch(x, labels, n, rng);
    optimizer_.step(model_.params().data(), model_.grads().data(), lr, host_optimizer_.steps(),
                    context_.stream());
    host_optimizer_.set_steps(host_optimizer_.steps() + 1);
    return loss;
  }

  void to_host(bool all) override {
    model_.params().copy_to_host(host_.params(), context_.stream());
    if (all) {
      model_.buffers().copy_to_host(host_.buffers(), context_.stream());
      for_each_state([&](std::span<float> host, float* device) {
        MURMUR_CUDA_CHECK(cudaMemcpyAsync(host.data(), device, host.size_bytes(),
                                          cudaMemcpyDeviceToHost, context_.stream()));
      });
    }
    context_.synchronize();
  }

  void to_device(bool all) override {
    model_.params().copy_from_host(host_.params(), context_.stream());
    if (all) {
      model_.buffers().copy_from_host(host_.buffers(), context_.stream());
      for_each_state([&](std::span<float> host, float* device) {
        MURMUR_CUDA_CHECK(cudaMemcpyAsync(device, host.data(), host.size_bytes(),
                                          cudaMemcpyHostToDevice, context_.stream()));
      });
    }
    context_.synchronize();
  }

  Evaluation evaluate(const nn::Dataset& data, int batch_size) override {
    to_device(true);
    return evaluate_in_batches(data, batch_size, [&](const float* x, const std::int32_t* y, int n) {
      return model_.evaluate(x, y, n);
    });
  }

  std::unique_ptr<ChunkStager> make_stager(transport::Transport& transport,
                                           std::size_t chunk_bytes) override {
    return std::make_unique<CudaStager>(transport, model_.params().data(),
                                        model_.params().floats(), context_.stream(), chunk_bytes);
  }

  std::string describe() const override {
    return fmt::format("cuda:{} {}, host arena {}", context_.device(),
                       nn::cuda::device_name(context_.device()),
                       pinned_.registered() ? "pinned (cudaHostRegister)" : "pageable (pinning refused)");
  }

 private:
  // Pairs each host optimizer state buffer with the device one of the same name.
  template <class Fn>
  void for_each_state(Fn fn) {
    const auto device_state = optimizer_.state();
    for (auto& [name, host] : host_optimizer_.state()) {
      auto it = std::find_if(device_state.begin(), device_state.end(),
                             [&](const auto& d) { return d.first == name; });
      if (it == device_state.end() || host.size() != optimizer_.floats())
        throw Error(fmt::format("cuda trainer: optimizer state '{}' has no device twin", name));
      fn(host, it->second);
    }
  }

  nn::Model& host_;
  optimizers::LocalOptimizer& host_optimizer_;
  nn::cuda::Context context_;
  nn::cuda::HostRegistration pinned_;  // unregistered before the host arena goes (it outlives us)
  nn::cuda::CudaModel model_;
  nn::cuda::CudaOptimizer optimizer_;
};

}  // namespace
#endif

std::unique_ptr<DeviceTrainer> make_device_trainer(const ExperimentConfig& config,
                                                   nn::Model& host,
                                                   optimizers::LocalOptimizer& host_optimizer,
                                                   int rank) {
  check_device(config);
  if (config.run.device != "cuda") return nullptr;
#ifdef MURMUR_WITH_CUDA
  const int device = nn::cuda::device_for_local_rank(local_rank(rank));
  return std::make_unique<CudaTrainer>(config, host, host_optimizer, device);
#else
  return nullptr;  // unreachable: check_device threw
#endif
}

}  // namespace murmur::runtime
