// DeviceTrainer: the GPU side of a peer whose config says run.device: cuda. It trains a device
// twin of the host model (nn/cuda) with a device optimizer, and keeps the host model the place
// the rest of the peer reads and writes: averaging, evaluation hand-offs, checkpoints and
// resume go through to_host()/to_device(). This header has no CUDA in it: a CPU build compiles
// it, and make_device_trainer() then refuses cuda with a ConfigError. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/config.h"
#include "core/rng.h"
#include "nn/dataset.h"
#include "nn/model.h"
#include "optimizers/local_optimizer.h"
#include "runtime/chunk_stager.h"
#include "runtime/evaluate.h"
#include "transport/transport.h"

namespace murmur::runtime {

class DeviceTrainer {
 public:
  virtual ~DeviceTrainer() = default;
  // One local step on the device: forward, loss, backward and the optimizer's update with
  // learning rate lr (the host optimizer's step count advances by one). Returns the mean loss.
  virtual float step(const float* x, const std::int32_t* labels, int n, Rng& rng, float lr) = 0;
  // Makes the host model's parameters current; with `all`, its buffers and the host optimizer's
  // state too (before a checkpoint or an evaluation).
  virtual void to_host(bool all) = 0;
  // The host copy changed (averaging, resume, a restored model): uploads it (`all`: buffers and
  // optimizer state too).
  virtual void to_device(bool all) = 0;
  // Evaluates the host model's current parameters and buffers on the device (uploading them).
  virtual Evaluation evaluate(const nn::Dataset& data, int batch_size) = 0;
  // "cuda:0 NVIDIA H200 (sm_90, 139 GiB), host arena pinned" for the log.
  virtual std::string describe() const = 0;
  // The stager of a pipelined gossip round (runtime/device_gossip.h) on the device arena, in
  // chunks of `chunk_bytes`: device memory directly where transport.supports_device_memory(),
  // else pinned host buffers. The trainer and the transport must outlive it.
  virtual std::unique_ptr<ChunkStager> make_stager(transport::Transport& transport,
                                                   std::size_t chunk_bytes) = 0;
};

// The device trainer for config.run.device: nullptr for "cpu". For "cuda" the device is
// local_rank % devices, local_rank from MURMUR_LOCAL_RANK, SLURM_LOCALID or
// OMPI_COMM_WORLD_LOCAL_RANK, else `rank`. `host` and `host_optimizer` must outlive the result.
// Throws ConfigError for cuda in a build without CUDA, CudaError if there is no usable GPU.
std::unique_ptr<DeviceTrainer> make_device_trainer(const ExperimentConfig& config,
                                                   nn::Model& host,
                                                   optimizers::LocalOptimizer& host_optimizer,
                                                   int rank);

// Throws ConfigError iff config.run.device names a device this build cannot use.
void check_device(const ExperimentConfig& config);

}  // namespace murmur::runtime
