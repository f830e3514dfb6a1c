#include "nn/loss.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace murmur::nn {

LossResult softmax_cross_entropy(const Tensor& logits, const std::int32_t* labels,
                                 const Tensor* grad) {
  const std::int64_t n = logits.rows();
  const std::int64_t classes = logits.row_size();
  LossResult result;
  const bool want_grad = grad != nullptr && grad->defined();
  const double inv_n = n > 0 ? 1.0 / static_cast<double>(n) : 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t label = labels[i];
    if (label < 0 || label >= classes)
      throw DataError(fmt::format("cross-entropy: label {} of row {} is outside [0, {})", label, i,
                                  classes));
    const float* z = logits.row(i);
    std::int64_t argmax = 0;
    for (std::int64_t j = 1; j < classes; ++j)
      if (z[j] > z[argmax]) argmax = j;
    // log-sum-exp around the maximum, in double: classes are few, and the loss is summed.
    const double zmax = z[argmax];
    double sum = 0;
    for (std::int64_t j = 0; j < classes; ++j) sum += std::exp(static_cast<double>(z[j]) - zmax);
    const double log_sum = std::log(sum) + zmax;
    result.loss_sum += log_sum - z[label];
    result.correct += argmax == label ? 1 : 0;
    if (want_grad) {
      float* g = grad->row(i);
      for (std::int64_t j = 0; j < classes; ++j) {
        const double p = std::exp(static_cast<double>(z[j]) - log_sum);
        g[j] = static_cast<float>((p - (j == label ? 1.0 : 0.0)) * inv_n);
      }
    }
  }
  return result;
}

}  // namespace murmur::nn
