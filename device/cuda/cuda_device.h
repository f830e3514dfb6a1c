// CudaDevice: the op table (device/device.h) on one GPU. Every op, and every copy to or from the
// host, is queued on one stream (the peer's compute stream, shared with the model's training
// kernels), so they run in the order they were called with no cross-stream hazards; the
// blocking copies and squared_distance wait for it, the async copies return an event. Arrays
// are cudaMalloc'd, staging buffers pinned (cudaMallocHost). Built only with MURMUR_WITH_CUDA.
// As device.h says: calls from two threads are safe on disjoint arrays (the CUDA runtime takes
// calls on one stream from any thread; the device keeps no other state).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "device/device.h"

namespace murmur::device::cuda {

// GPU `index` (device_for_local_rank in device/cuda/memory.h picks it), made current for this
// thread. Ops go on `stream` (which must outlive the device), or on a stream of its own when
// null. Throws CudaError if there is no usable GPU.
std::unique_ptr<Device> make_device(int index, cudaStream_t stream = nullptr);

// The CUDA index of a device made by make_device, for the model's own handles.
int index_of(const Device& device);

}  // namespace murmur::device::cuda
