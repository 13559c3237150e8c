// Matrix products through the register-tiled kernel in kernels/gemm.h on the row-major buffers.
#pragma once

#include "autograd/tensor.h"

namespace gradlab {

// a [..., M, K] @ b [..., K, N] -> [..., M, N]. Both operands have rank >= 2; leading (batch)
// axes broadcast like NumPy. A 2-D b (a weight) is applied to all of a's rows in one GEMM.
Tensor matmul(const Tensor& a, const Tensor& b);

// x [..., in] @ weight^T + bias: weight is [out, in] as in PyTorch (and in checkpoints), bias
// [out] or undefined. One GEMM with a transposed operand; no transposed copy of the weight.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

}  // namespace gradlab
