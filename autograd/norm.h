// Layer normalisation over the last axis, with a fused forward and backward.
#pragma once

#include "autograd/tensor.h"

namespace gradlab {

// (x - mean) / sqrt(var + eps) * weight + bias over the last axis (biased variance, as
// PyTorch). x [..., C]; weight and bias [C], either may be undefined (no affine part).
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

}  // namespace gradlab
