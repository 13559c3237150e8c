#include "autograd/kernels/layer_norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/kernels/elementwise.h"
#include "autograd/kernels/kernel_list.h"
#include "autograd/kernels/rows.h"

namespace gradlab::kernels {
namespace {

// Rows per block of the backward: each block adds its weight and bias gradients into its own
// partial sums, which are then added in block order, so threads share the rows and the result
// does not depend on how many there are.
constexpr int64_t kRowBlock = 64;

// The weight, or ones when there is none; the bias, or zeros: one row loop serves both cases,
// with no branch per element.
template <class T>
const T* weight_or(const T* p, int64_t channels, T fill) {
  if (p) return p;
  thread_local std::vector<T> fills[2];  // ones, zeros; only grow
  std::vector<T>& v = fills[fill == T(0)];
  if (static_cast<int64_t>(v.size()) < channels) v.assign(channels, fill);
  return v.data();
}

// One row of the backward: dx_row, and the row's terms added to dw_sum and db_sum.
// dxhat = g * w; dx = s * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
template <class T>
void backward_row(const T* xr, const T* gr, const T* w, T m, T s, int64_t channels, T* dr,
                  T* dw_sum, T* db_sum) {
  const T sum_d = sum_over<T>(channels, [&](int64_t c) { return gr[c] * w[c]; });
  const T sum_dx =
      sum_over<T>(channels, [&](int64_t c) { return gr[c] * w[c] * ((xr[c] - m) * s); });
#pragma omp simd
  for (int64_t c = 0; c < channels; ++c) {
    const T xhat = (xr[c] - m) * s;
    dw_sum[c] += gr[c] * xhat;
    db_sum[c] += gr[c];
  }
  const T mean_d = sum_d / static_cast<T>(channels);
  const T mean_dx = sum_dx / static_cast<T>(channels);
#pragma omp simd
  for (int64_t c = 0; c < channels; ++c) {
    const T xhat = (xr[c] - m) * s;
    dr[c] = s * (gr[c] * w[c] - mean_d - xhat * mean_dx);
  }
}

}  // namespace

template <class T>
void layer_norm_forward(const T* x, const T* weight, const T* bias, T eps, int64_t rows,
                        int64_t channels, T* y, T* mean, T* rstd) {
  const T* w = weight_or<T>(weight, channels, 1);
  const T* b = weight_or<T>(bias, channels, 0);
  for_each_index(rows, rows * channels > kParallelThreshold, [&](int64_t r) {
    const T* xr = x + r * channels;
    const T m = sum_over<T>(channels, [&](int64_t c) { return xr[c]; }) / static_cast<T>(channels);
    const T var = sum_over<T>(channels, [&](int64_t c) { return (xr[c] - m) * (xr[c] - m); }) /
                  static_cast<T>(channels);
    const T s = 1 / std::sqrt(var + eps);
    mean[r] = m;
    rstd[r] = s;
    T* yr = y + r * channels;
#pragma omp simd
    for (int64_t c = 0; c < channels; ++c) {
      const T normed = (xr[c] - m) * s;
      yr[c] = normed * w[c] + b[c];
    }
  });
}

template <class T>
void layer_norm_backward(const T* x, const T* g, const T* weight, const T* mean, const T* rstd,
                         int64_t rows, int64_t channels, T* dx, T* dweight, T* dbias) {
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  const T* w = weight_or<T>(weight, channels, 1);
  thread_local std::vector<T> partial;  // [blocks, 2, C]: dweight's, then dbias's sums
  partial.assign(blocks * 2 * channels, T(0));
  T* sums = partial.data();
  for_each_index(blocks, rows * channels > kParallelThreshold, [&](int64_t block) {
    T* dw_sum = sums + block * 2 * channels;
    const int64_t end = std::min(rows, (block + 1) * kRowBlock);
    for (int64_t r = block * kRowBlock; r < end; ++r) {
      backward_row(x + r * channels, g + r * channels, w, mean[r], rstd[r], channels,
                   dx + r * channels, dw_sum, dw_sum + channels);
    }
  });
  for (int64_t c = 0; c < channels; ++c) {
    T dw_total = 0, db_total = 0;
    for (int64_t block = 0; block < blocks; ++block) {
      dw_total += sums[block * 2 * channels + c];
      db_total += sums[(block * 2 + 1) * channels + c];
    }
    if (dweight) dweight[c] = dw_total;
    if (dbias) dbias[c] = db_total;
  }
}

GRADLAB_LAYER_NORM_KERNELS(GRADLAB_INSTANTIATE_KERNEL)

}  // namespace gradlab::kernels
