#include "api/buffers.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "optimizers/device_arrays.h"
#include "optimizers/staging_transport.h"
#include "topology/mixing.h"
#include "transport/collectives.h"
#include "transport/factory.h"
#include "transport/tag.h"

#ifdef MURMUR_WITH_CUDA
#include <cuda_runtime_api.h>

#include "device/cuda/cuda_device.h"
#endif

namespace murmur::api {
namespace {

std::string where(const Buffer& b) {
  return b.memory == Memory::kHost ? std::string("the host") : fmt::format("cuda:{}", b.device);
}

std::span<float> floats(const Buffer& b) { return {b.data, b.count}; }

// Runs `fn` with the transport that moves `device`'s memory: the real one for host memory, else
// one that stages through the device's pinned buffers (or hands device memory to a transport
// that reads it itself).
template <class Fn>
void with_transport(transport::Transport& real, device::Device& device,
                    const ExperimentConfig& config, Fn fn) {
  if (device.host_memory()) {
    fn(real);
    return;
  }
  optimizers::StagingTransport staging(real, device,
                                       static_cast<std::size_t>(config.transport.chunk_bytes));
  fn(staging);
}

void check_buffer(const Buffer& b, const char* what) {
  if (b.data == nullptr && b.count > 0) throw Error(fmt::format("{}: a null buffer of {} floats", what, b.count));
}

}  // namespace

device::Device& Devices::of(const Buffer& b, void* cuda_stream) {
  if (b.memory == Memory::kHost) return device::cpu();
#ifdef MURMUR_WITH_CUDA
  auto& slot = cuda_[b.device];
  if (!slot) slot = device::cuda::make_device(b.device, static_cast<cudaStream_t>(cuda_stream));
  return *slot;
#else
  (void)cuda_stream;
  throw ConfigError(fmt::format("a buffer on cuda:{}, but this murmur was built without CUDA "
                                "(configure with the CUDA toolkit installed)", b.device));
#endif
}

Parameters::Parameters(std::span<const Buffer> parts, Devices& devices, void* cuda_stream)
    : parts_(parts.begin(), parts.end()),
      device_(parts.empty() ? device::cpu() : devices.of(parts.front(), cuda_stream)) {
  if (parts_.empty()) throw Error("attach: no parameters");
  std::size_t total = 0;
  for (std::size_t k = 0; k < parts_.size(); ++k) {
    const Buffer& b = parts_[k];
    check_buffer(b, "attach");
    if (b.memory != parts_.front().memory || (b.memory == Memory::kCuda && b.device != parts_.front().device)) {
      throw Error(fmt::format("attach: buffer {} is on {}, buffer 0 on {}: every parameter on one device",
                              k, where(b), where(parts_.front())));
    }
    total += b.count;
  }
  if (total == 0) throw Error("attach: the parameters hold no floats");
  if (parts_.size() == 1) {
    arena_ = floats(parts_.front());
    return;
  }
  owned_ = device_.zeros(total);
  arena_ = owned_.span();
  gather();
}

void Parameters::gather() {
  if (owned_.empty()) return;
  std::size_t at = 0;
  for (const Buffer& b : parts_) {
    device_.copy(arena_.subspan(at, b.count), floats(b));
    at += b.count;
  }
}

void Parameters::scatter() {
  if (owned_.empty()) return;
  std::size_t at = 0;
  for (const Buffer& b : parts_) {
    device_.copy(floats(b), arena_.subspan(at, b.count));
    at += b.count;
  }
  device_.synchronize();  // the program reads them next, outside murmur's stream
}

std::vector<std::string> Parameters::describe() const {
  std::vector<std::string> lines;
  for (std::size_t k = 0; k < parts_.size(); ++k) {
    lines.push_back(fmt::format("buffer {}: {} floats", k, parts_[k].count));
  }
  return lines;
}

void neighbor_average(transport::Transport& real, Devices& devices, const Buffer& x,
                      const ExperimentConfig& config, std::int64_t round) {
  check_buffer(x, "neighbor_average");
  const int n = config.world.size, rank = config.world.rank;
  const auto mix = topology::rank_mixing(config.topology, n, rank, config.run.seed, round);
  double row = mix.self_weight;
  for (const double w : mix.recv_weights) row += w;
  if (std::abs(row - 1) > 1e-9) {
    throw ConfigError(fmt::format(
        "neighbor_average: topology.graph {} with topology.weights {}: rank {}'s row of the mixing "
        "matrix sums to {:.6g} in round {}; neighbor_average takes W's rows, which must sum to 1 "
        "(an undirected graph, or a directed one whose in- and out-degrees agree)",
        config.topology.graph, config.topology.weights, rank, row, round));
  }
  if (x.count == 0) return;
  device::Device& dev = devices.of(x);
  with_transport(real, dev, config, [&](transport::Transport& t) {
    const std::size_t bytes = x.count * sizeof(float);
    const auto region = optimizers::register_array(t, dev, floats(x));
    device::Array inbox = dev.zeros(x.count * std::max<std::size_t>(1, mix.recv_from.size()));
    const auto inbox_region = optimizers::register_array(t, dev, inbox.span());
    std::vector<transport::ByteRange> ranges;
    std::vector<const float*> inputs;
    std::vector<float> weights;
    for (std::size_t k = 0; k < mix.recv_from.size(); ++k) {
      ranges.push_back({k * bytes, bytes});
      inputs.push_back(inbox.data() + k * x.count);
      weights.push_back(static_cast<float>(mix.recv_weights[k]));
    }
    const transport::Tag tag = transport::TagLayout(t).make(transport::purpose::kUserCollective, round);
    transport::neighbor_exchange(t, tag, *region, {0, bytes}, mix.send_to, *inbox_region, ranges,
                                 mix.recv_from, transport::collective_options(config.transport));
    dev.mix(floats(x), static_cast<float>(mix.self_weight), inputs, weights);
    dev.synchronize();
  });
}

void allreduce(transport::Transport& real, Devices& devices, const Buffer& x, bool mean,
               const ExperimentConfig& config, std::int64_t round) {
  check_buffer(x, "allreduce");
  if (x.count == 0) return;
  device::Device& dev = devices.of(x);
  with_transport(real, dev, config, [&](transport::Transport& t) {
    const auto region = optimizers::register_array(t, dev, floats(x));
    optimizers::DeviceFloatOps ops(dev);
    const transport::Tag tag = transport::TagLayout(t).make(transport::purpose::kUserCollective, round);
    transport::Allreduce(t, transport::collective_options(config.transport), ops)
        .run(*region, floats(x), mean ? transport::ReduceOp::kAverage : transport::ReduceOp::kSum, tag);
    dev.synchronize();
  });
}

}  // namespace murmur::api
