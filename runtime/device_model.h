// DeviceModel: a peer's model on the device it trains on (run.device), with that device's op
// table. The parameter and gradient arenas the local optimizer and the averaging algorithm work
// on are memory of that device; the host nn::Model stays the description of the network and the
// copy that checkpoints and resume read and write, synchronized with to_host()/to_device().
// - cpu: the host model itself (device::cpu(); the copies do nothing);
// - staged_cpu: the same arenas behind an off-host device (device::make_offhost_cpu()): what a
//   GPU peer does around its model (staged transfers, copies of the resume state), on the CPU;
// - cuda: a device twin (nn/cuda) on GPU local_rank % devices, trained and evaluated there.
// This header has no CUDA in it: a CPU build compiles it, and make_device_model() then refuses
// cuda with a ConfigError. Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/rng.h"
#include "device/device.h"
#include "nn/dataset.h"
#include "nn/model.h"
#include "runtime/evaluate.h"

namespace murmur::runtime {

class DeviceModel {
 public:
  virtual ~DeviceModel() = default;
  virtual device::Device& device() = 0;
  // The arenas on the device: what the optimizer and the averaging work on.
  virtual std::span<float> params() = 0;
  virtual std::span<float> grads() = 0;
  // Forward, loss and backward on one batch (x, labels in host memory); grads() then holds the
  // gradient of the mean cross-entropy. Returns the mean loss. `grads_ready` (may be null) hears
  // from which offset on grads() is final: layer by layer on the host, once (0) on a GPU.
  virtual float train_batch(const float* x, const std::int32_t* labels, int n, Rng& rng,
                            const std::function<void(std::size_t)>* grads_ready = nullptr) = 0;
  // Evaluates params() and the buffers as they are on the device.
  virtual Evaluation evaluate(const nn::Dataset& data, int batch_size) = 0;
  // The host model's parameters (and, with `all`, its buffers) made current from the device.
  virtual void to_host(bool all) = 0;
  // The host model changed (resume): uploads its parameters (and, with `all`, its buffers).
  virtual void to_device(bool all) = 0;
  // "cpu", or "cuda:0 NVIDIA H200 (sm_90, 139 GiB)", for the log.
  virtual std::string describe() const = 0;
};

// The model of config.run.device over `host` (which must outlive it): cpu, or cuda on GPU
// local_rank % devices, local_rank from MURMUR_LOCAL_RANK, SLURM_LOCALID or
// OMPI_COMM_WORLD_LOCAL_RANK, else `rank`. Throws ConfigError for an unknown device or cuda in a
// build without CUDA, CudaError if there is no usable GPU.
std::unique_ptr<DeviceModel> make_device_model(const ExperimentConfig& config, nn::Model& host,
                                               int rank);

// The names run.device takes in this build ("cpu", "staged_cpu", and "cuda" with CUDA).
std::vector<std::string_view> device_names();

// Throws ConfigError iff config.run.device names a device this build cannot use.
void check_device(const ExperimentConfig& config);

}  // namespace murmur::runtime
