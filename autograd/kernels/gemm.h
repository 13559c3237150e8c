// The one matrix-product kernel behind matmul, linear and fused attention. Internal to
// autograd/.
//
// Why our own and not Eigen's: at this project's sizes (K of 16-512, thousands of rows) Eigen
// packs both operands on every call and zeroes C before accumulating into it; its GEMM was half
// of a training step, a third of that packing. This kernel packs only B, one k-block at a time
// (and reads it in place where copying costs more than it saves), reads A in place, keeps a
// tile of C in registers (6 rows by 4 vectors with AVX-512; narrower tiles take more rows), and
// starts the accumulators from the bias or the old C, so C is never zeroed first. Design and
// block sizes: gemm.cpp.
#pragma once

#include <cstdint>

namespace gradlab::kernels {

// Matrix products below this many multiply-adds (about 40 us on one core) run on one thread:
// waking the sleeping second thread and joining it costs 11-23 us. At 2^22 the copy model's
// attention projections (1280 x 64 x 64, 1280 x 192 x 64) split; a lower threshold gains nothing
// more.
constexpr int64_t kParallelGemmFlops = 1 << 22;

// A matrix operand in row-major storage: element (i, j) of op(X) is
// data[i * stride + j] or, when transposed, data[j * stride + i].
template <class T>
struct MatrixRef {
  const T* data;
  int64_t stride;  // distance between consecutive rows of the stored (untransposed) matrix
  bool transposed;
};

// c [M, N] (row stride ldc) = op(a) [M, K] @ op(b) [K, N], plus:
//   - the previous contents of c when accumulate is set,
//   - bias [N] added to every row when bias is not null.
// With parallel set, rows are split across the OpenMP threads. Every element's sum runs over k
// in the same order whatever the thread count, so results do not depend on it.
template <class T>
void gemm(int64_t m, int64_t n, int64_t k, MatrixRef<T> a, MatrixRef<T> b, T* c, int64_t ldc,
          bool accumulate, const T* bias, bool parallel);

}  // namespace gradlab::kernels
