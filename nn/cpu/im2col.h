// im2col / col2im for NCHW batches: the unfolding that turns a convolution into one GEMM.
// The column matrix of a chunk of `count` samples is [C*KH*KW][count*OH*OW], row-major, so
// column j = n*OH*OW + oh*OW + ow. Pure functions on caller-owned buffers; thread-compatible.
#pragma once

#include "nn/cpu/conv.h"

namespace murmur::nn::cpu {

// Writes the columns of samples [first, first+count) of x (the whole batch, NCHW) into col.
// Padding reads as zero.
void im2col(const ConvGeometry& g, const float* x, int first, int count, float* col);

// Adds the columns in col back into samples [first, first+count) of dx (the transpose of
// im2col). dx must be zeroed (or hold a gradient to accumulate onto) by the caller.
void col2im(const ConvGeometry& g, const float* col, int first, int count, float* dx);

}  // namespace murmur::nn::cpu
