// Softmax cross-entropy over classes for a batch of logits, the mean over the batch as
// torch.nn.functional.cross_entropy (reduction='mean'). Computed stably (log-sum-exp).
#pragma once

#include <cstdint>

#include "nn/tensor.h"

namespace murmur::nn {

struct LossResult {
  double loss_sum = 0;       // sum over the batch of -log softmax(logits)[label]
  std::int64_t correct = 0;  // rows whose argmax (first maximum) equals the label
};

// logits: [n, classes]. If grad is defined (same shape), writes d(mean loss)/d(logits) into it
// = (softmax - onehot) / n. Throws DataError for a label outside [0, classes).
LossResult softmax_cross_entropy(const Tensor& logits, const std::int32_t* labels,
                                 const Tensor* grad);

}  // namespace murmur::nn
