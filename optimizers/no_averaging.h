// `none`: every peer trains alone (the single-peer reference, and the "without averaging the
// peers drift apart" control). Also what make_averaging builds for a world of one.
#pragma once

#include "optimizers/algorithm.h"

namespace murmur::optimizers {

extern const AlgorithmInfo kNoAveraging;

class NoAveraging final : public Averaging {
 public:
  void after_step(std::int64_t) override {}
};

}  // namespace murmur::optimizers
