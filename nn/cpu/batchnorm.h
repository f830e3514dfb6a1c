// Batch normalization kernels over NCHW batches (per channel, over batch and plane), with
// PyTorch's semantics: training normalizes by the biased batch variance and moves the running
// variance toward the unbiased one; evaluation uses the running statistics. Statistics are
// summed in double. Caller-owned buffers; thread-compatible.
#pragma once

#include <cstddef>

namespace murmur::nn::cpu {

struct BatchNormGeometry {
  int batch = 0;
  int channels = 0;
  int plane = 0;  // h * w
  std::size_t size() const { return static_cast<std::size_t>(batch) * channels * plane; }
  // Values per channel that the statistics are taken over: batch * plane.
  std::size_t count() const { return static_cast<std::size_t>(batch) * plane; }
};

// Training forward: y = (x - mean) * invstd * weight + bias with the batch's mean and biased
// variance; writes mean and invstd = 1/sqrt(var + eps) (channels floats each) for backward and
// updates running_mean/running_var with `momentum` (running_var gets var * m / (m - 1)).
// weight and bias may be null (affine=False). Throws Error if count() < 2, as PyTorch does.
void batchnorm2d_forward_train(const BatchNormGeometry& g, const float* x, const float* weight,
                               const float* bias, float eps, float momentum, float* y, float* mean,
                               float* invstd, float* running_mean, float* running_var);

// Evaluation forward with the running statistics.
void batchnorm2d_forward_eval(const BatchNormGeometry& g, const float* x, const float* weight,
                              const float* bias, float eps, const float* running_mean,
                              const float* running_var, float* y);

// Backward of either forward, given the mean and invstd that forward normalized with (the
// batch's for training, running_mean and 1/sqrt(running_var + eps) for evaluation).
// Writes dx unless null; writes, or adds when `accumulate`, dweight and dbias unless null.
void batchnorm2d_backward(const BatchNormGeometry& g, bool training, const float* x,
                          const float* dy, const float* weight, const float* mean,
                          const float* invstd, float* dx, float* dweight, float* dbias,
                          bool accumulate);

// invstd[c] = 1 / sqrt(var[c] + eps): evaluation's normalizer, for batchnorm2d_backward.
void batchnorm_invstd(int channels, const float* var, float eps, float* invstd);

}  // namespace murmur::nn::cpu
