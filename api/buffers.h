// A program's float buffers (murmur::Buffer) as murmur's rooms take them: the device whose op
// table computes on them (the host's, or a CUDA device's), the attached parameters as the one
// flat arena the averaging works on, and the primitives of murmur/murmur.h over one buffer.
// Not thread-safe (the Communicator's thread).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "api/murmur/murmur.h"
#include "core/config.h"
#include "device/device.h"
#include "transport/transport.h"

namespace murmur::api {

// The devices of a program's buffers: the host's, and one per CUDA device index, made on first
// use (on the program's stream, where it gave one).
class Devices {
 public:
  // Throws ConfigError for CUDA memory in a build without CUDA, CudaError without a usable GPU.
  device::Device& of(const Buffer& buffer, void* cuda_stream = nullptr);

 private:
  std::map<int, std::unique_ptr<device::Device>> cuda_;
};

// The attached parameters: one buffer is the arena itself; several are copied into an arena of
// murmur's (gather) around each averaging and back (scatter).
class Parameters {
 public:
  // Throws Error naming the buffer that is null, or on another device than the first.
  Parameters(std::span<const Buffer> parts, Devices& devices, void* cuda_stream);
  device::Device& device() const { return device_; }
  std::span<float> arena() const { return arena_; }
  // parts -> arena, and arena -> parts; nothing for one buffer.
  void gather();
  void scatter();
  // A line per buffer, "buffer 3: 4096 floats", where the program gave no description.
  std::vector<std::string> describe() const;

 private:
  std::vector<Buffer> parts_;
  device::Device& device_;
  device::Array owned_;  // several parts: the arena
  std::span<float> arena_;
};

// The primitives over `x` on `transport` (kUserCollective, round `round`): one gossip round of
// topology.graph's mixing matrix (its rows must sum to 1), and the sum or mean over every peer.
void neighbor_average(transport::Transport& transport, Devices& devices, const Buffer& x,
                      const ExperimentConfig& config, std::int64_t round);
void allreduce(transport::Transport& transport, Devices& devices, const Buffer& x, bool mean,
               const ExperimentConfig& config, std::int64_t round);

}  // namespace murmur::api
