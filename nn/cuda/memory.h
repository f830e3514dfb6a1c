// The CUDA memory, stream and event types of the device room (device/cuda/memory.h), named in
// nn::cuda, where every layer and the model use them.
#pragma once

#include "device/cuda/memory.h"

namespace murmur::nn::cuda {

using device::cuda::DeviceBuffer;
using device::cuda::device_count;
using device::cuda::device_for_local_rank;
using device::cuda::device_name;
using device::cuda::Event;
using device::cuda::HostRegistration;
using device::cuda::PinnedBuffer;
using device::cuda::Stream;

}  // namespace murmur::nn::cuda
