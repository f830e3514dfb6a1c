// Device: where a peer's flat float arrays live (host memory or a CUDA GPU) and the one op table
// every algorithm and local optimizer computes with: mix, axpy, axpby, scale, squared distance,
// the SGD and AdamW updates. The same algorithm code runs on either: it holds spans of the
// device's memory (std::span<float> over a device pointer on a GPU, never dereferenced by the
// CPU there) and calls these ops. A CPU and a CUDA backend implement it (device/cpu.cc,
// device/cuda/cuda_device.cc, the latter built only with MURMUR_WITH_CUDA). Ops are ordered:
// each sees the results of the ops before it; copies to and from host memory return when done.
// Calls from two threads are safe on disjoint arrays (an algorithm's communication thread stages
// its snapshot while the training thread steps the parameters): the backends keep no state of
// their own between calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace murmur::device {

// Owned memory: a span of floats and whatever keeps it alive (freed with the last copy of the
// Array). Copies share the memory; zeroed at birth.
class Array {
 public:
  Array() = default;
  Array(std::span<float> floats, std::shared_ptr<void> owner)
      : floats_(floats), owner_(std::move(owner)) {}
  std::span<float> span() const { return floats_; }
  float* data() const { return floats_.data(); }
  std::size_t size() const { return floats_.size(); }
  bool empty() const { return floats_.empty(); }
  std::span<std::byte> bytes() const { return std::as_writable_bytes(floats_); }

 private:
  std::span<float> floats_;
  std::shared_ptr<void> owner_;
};

// The completion of an asynchronous copy.
class Fence {
 public:
  virtual ~Fence() = default;
  // True iff the copy is done (never blocks).
  virtual bool ready() = 0;
  // Blocks until the copy is done. Throws (CudaError) if the device failed.
  virtual void wait() = 0;
};

// torch.optim.SGD with dampening 0: d = g + wd p; b = first ? d : mu b + d;
// p -= lr (nesterov ? d + mu b : b); without momentum p -= lr d.
struct SgdStep {
  float lr = 0, momentum = 0, weight_decay = 0;
  bool nesterov = false;
  bool first_step = false;  // the momentum buffer starts as the first gradient
};

// torch.optim.AdamW (Loshchilov & Hutter 2019, Algorithm 2), its scalars precomputed in double
// by the caller: p *= decay; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= step_size m / (sqrt(v) inv_bias2_sqrt + eps).
struct AdamWStep {
  float decay = 1;
  float beta1 = 0.9f, one_minus_beta1 = 0.1f;
  float beta2 = 0.999f, one_minus_beta2 = 0.001f;
  float step_size = 0;
  float inv_bias2_sqrt = 1;
  float eps = 1e-8f;
};

class Device {
 public:
  virtual ~Device() = default;

  // "cpu", or "cuda:0 NVIDIA H200 (sm_90, 139 GiB)", for logs.
  virtual std::string describe() const = 0;
  // True iff the CPU (and so any transport) reads and writes this device's memory directly.
  virtual bool host_memory() const = 0;

  // `floats` zeroed floats of this device's memory. Throws (std::bad_alloc, CudaError).
  virtual Array zeros(std::size_t floats) = 0;
  // `floats` zeroed floats of host memory that copies to and from this device are fastest with
  // (pinned for a GPU; plain on the CPU): the staging buffers of transfers.
  virtual Array staging(std::size_t floats) = 0;

  // Copies between this device's memory and host memory, ordered after every op before them.
  // The blocking ones return when the copy is done; the async ones return a Fence, and the
  // memory on both sides must stay untouched until it is ready.
  virtual void download(std::span<float> host, std::span<const float> mine) = 0;
  virtual void upload(std::span<float> mine, std::span<const float> host) = 0;
  virtual std::unique_ptr<Fence> download_async(std::span<float> host,
                                                std::span<const float> mine) = 0;
  virtual std::unique_ptr<Fence> upload_async(std::span<float> mine,
                                              std::span<const float> host) = 0;
  // Blocks until every op queued so far is done (before the device's memory is handed to
  // something outside the op table, e.g. a transport that reads device memory itself).
  virtual void synchronize() = 0;

  // ---- the op table: every span is this device's memory, of equal sizes where two meet ----
  // x <- v everywhere.
  virtual void fill(std::span<float> x, float v) = 0;
  // out <- x.
  virtual void copy(std::span<float> out, std::span<const float> x) = 0;
  // x <- a x.
  virtual void scale(std::span<float> x, float a) = 0;
  // y <- y + a x.
  virtual void axpy(std::span<float> y, float a, std::span<const float> x) = 0;
  // y <- a x + b y.
  virtual void axpby(std::span<float> y, float a, std::span<const float> x, float b) = 0;
  // y <- y + a (u - v).
  virtual void add_scaled_diff(std::span<float> y, float a, std::span<const float> u,
                               std::span<const float> v) = 0;
  // x <- self x + sum_k weights[k] inputs[k]; each input points at x.size() floats.
  virtual void mix(std::span<float> x, float self, std::span<const float* const> inputs,
                   std::span<const float> weights) = 0;
  // sum_i (x_i - y_i)^2, accumulated in double (waits for the device).
  virtual double squared_distance(std::span<const float> x, std::span<const float> y) = 0;
  // The local optimizers' updates; `buffer`, `m`, `v` are their state (buffer may be empty
  // without momentum).
  virtual void sgd_step(std::span<float> params, std::span<const float> grads,
                        std::span<float> buffer, const SgdStep& s) = 0;
  virtual void adamw_step(std::span<float> params, std::span<const float> grads,
                          std::span<float> m, std::span<float> v, const AdamWStep& a) = 0;
};

// The host's device: plain loops over host memory that the compiler vectorizes. Thread-safe
// for disjoint outputs (it keeps no state).
Device& cpu();

// Host memory that pretends to live elsewhere (host_memory() is false), so that what a GPU
// peer does (staged transfers through its staging buffers, copies around every host access)
// runs and is tested on machines without one. Same arithmetic as cpu(). For tests and
// murmur-sim; owned by the caller.
std::unique_ptr<Device> make_offhost_cpu();

}  // namespace murmur::device
