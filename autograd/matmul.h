// Matrix products through Eigen's GEMM on the row-major buffers (no naive loops).
#pragma once

#include "autograd/tensor.h"

namespace gradlab {

// a [..., M, K] @ b [..., K, N] -> [..., M, N]. Both operands have rank >= 2; leading (batch)
// axes broadcast like NumPy. A 2-D b (a weight) is applied to all of a's rows in one GEMM.
Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace gradlab
