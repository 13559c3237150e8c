#include "autograd/kernels/feed_forward.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "autograd/kernels/gelu.h"
#include "autograd/kernels/gemm.h"
#include "autograd/kernels/layer_norm.h"
#include "autograd/kernels/simd.h"

namespace gradlab::kernels {
namespace {

// Rows per block, a multiple of layer norm's row block so that its weight sums are cut where the
// composed op cuts them. A block's hidden activations and their gradient (2 x 128 x F floats,
// 512 KiB at F = 512) stay in the second-level cache with the two weight matrices.
constexpr int64_t kBlockRows = 128;
static_assert(kBlockRows % kLayerNormRowBlock == 0);

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Both products' multiply-adds against the GEMM's threshold for sharing a product.
template <class T>
bool worth_threads(const FeedForwardParams<T>& p) {
  return 2 * p.rows * p.channels * p.hidden > kParallelGemmFlops && p.rows > kBlockRows;
}

// [begin, end) of `count` items for thread t of `threads`.
struct Share {
  int64_t begin, end;
  Share(int64_t count, int t, int threads)
      : begin(count * t / threads), end(count * (t + 1) / threads) {}
  int64_t size() const { return end - begin; }
};

}  // namespace

template <class T>
void feed_forward_forward(const FeedForwardParams<T>& p, const T* x, T* y,
                          const FeedForwardSaved<T>& saved) {
  const int64_t c = p.channels, f = p.hidden;
  // The composed ops' calls on the block's rows; rows never meet, so blocks go to threads whole.
#pragma omp parallel for if (worth_threads(p)) schedule(static)
  for (int64_t block = 0; block < ceil_div(p.rows, kBlockRows); ++block) {
    const int64_t r0 = block * kBlockRows, n = std::min(kBlockRows, p.rows - r0);
    T* normed = saved.normed + r0 * c;  // [n, C]
    T* pre = saved.pre_gelu + r0 * f;   // [n, F]
    T* post = saved.post_gelu + r0 * f;
    T* out = y + r0 * c;
    layer_norm_forward(x + r0 * c, p.norm_weight, p.norm_bias, p.eps, n, c, normed, saved.mean + r0,
                       saved.rstd + r0);
    gemm<T>(n, f, c, {normed, c, false}, {p.fc1_weight, c, true}, pre, f, false, p.fc1_bias, false);
    gelu_forward(pre, post, n * f);
    gemm<T>(n, c, f, {post, f, false}, {p.fc2_weight, f, true}, out, c, false, p.fc2_bias, false);
    const T* in = x + r0 * c;
    for (int64_t i = 0; i < n * c; ++i) out[i] = in[i] + out[i];
  }
}

// Per block of rows: first the row-local chain back through fc2, GELU, fc1 and layer norm (its
// 64-row parts shared among the threads), then the block's terms of the weight and bias
// gradients (their rows or columns shared among the threads), each element adding the block's
// rows in order, as one product over all rows would.
template <class T>
void feed_forward_backward(const FeedForwardParams<T>& p, const T* x,
                           const FeedForwardSaved<T>& saved, const T* dy,
                           const FeedForwardGrads<T>& grads) {
  const int64_t c = p.channels, f = p.hidden;
  const int64_t units = ceil_div(p.rows, kLayerNormRowBlock);
  // One block's dL/d(hidden) [kBlockRows, F] and dL/d(normed) [kBlockRows, C], then layer norm's
  // partial weight and bias sums [units, 2, C]; each part starts on a vector boundary.
  const int64_t lanes = simd::kLanes<T>;
  const int64_t hidden_size = ceil_div(kBlockRows * f, lanes) * lanes;
  const int64_t normed_size = ceil_div(kBlockRows * c, lanes) * lanes;
  thread_local std::vector<T> buffer;
  T* const d_hidden = simd::aligned_scratch(buffer, hidden_size + normed_size + units * 2 * c);
  T* const d_normed = d_hidden + hidden_size;
  T* const norm_sums = d_normed + normed_size;
  if (grads.fc1_bias) std::fill_n(grads.fc1_bias, f, T(0));
  if (grads.fc2_bias) std::fill_n(grads.fc2_bias, c, T(0));

#pragma omp parallel if (worth_threads(p))
  {
    const int t = omp_get_thread_num(), threads = omp_get_num_threads();
    for (int64_t block = 0; block < ceil_div(p.rows, kBlockRows); ++block) {
      const int64_t r0 = block * kBlockRows, n = std::min(kBlockRows, p.rows - r0);
      const int64_t first_unit = r0 / kLayerNormRowBlock;
#pragma omp for schedule(static)
      for (int64_t u = 0; u < ceil_div(n, kLayerNormRowBlock); ++u) {
        const int64_t u0 = r0 + u * kLayerNormRowBlock;
        const int64_t rows = std::min(kLayerNormRowBlock, p.rows - u0);
        T* dh = d_hidden + u * kLayerNormRowBlock * f;  // [rows, F]
        T* dn = d_normed + u * kLayerNormRowBlock * c;  // [rows, C]
        gemm<T>(rows, f, c, {dy + u0 * c, c, false}, {p.fc2_weight, f, false}, dh, f, false,
                nullptr, false);
        gelu_backward(saved.pre_gelu + u0 * f, saved.post_gelu + u0 * f, dh, dh, rows * f);
        gemm<T>(rows, c, f, {dh, f, false}, {p.fc1_weight, c, false}, dn, c, false, nullptr, false);
        T* sums = norm_sums + (first_unit + u) * 2 * c;
        layer_norm_backward(x + u0 * c, dn, p.norm_weight, saved.mean + u0, saved.rstd + u0, rows,
                            c, grads.dx + u0 * c, sums, sums + c);
        T* dx = grads.dx + u0 * c;
        const T* residual = dy + u0 * c;
        for (int64_t i = 0; i < rows * c; ++i) dx[i] = dx[i] + residual[i];
      }
      const bool accumulate = block > 0;
      const T* dy_block = dy + r0 * c;  // [n, C]
      if (grads.fc2_weight) {
        const Share mine(c, t, threads);  // rows of dW2 [C, F] += dy^T [C, n] @ post [n, F]
        gemm<T>(mine.size(), f, n, {dy_block + mine.begin, c, true},
                {saved.post_gelu + r0 * f, f, false}, grads.fc2_weight + mine.begin * f, f,
                accumulate, nullptr, false);
      }
      if (grads.fc1_weight) {
        const Share mine(f, t, threads);  // rows of dW1 [F, C] += dh^T [F, n] @ normed [n, C]
        gemm<T>(mine.size(), c, n, {d_hidden + mine.begin, f, true},
                {saved.normed + r0 * c, c, false}, grads.fc1_weight + mine.begin * c, c, accumulate,
                nullptr, false);
      }
      if (grads.fc2_bias) {
        const Share mine(c, t, threads);
        for (int64_t r = 0; r < n; ++r) {
          for (int64_t j = mine.begin; j < mine.end; ++j) grads.fc2_bias[j] += dy_block[r * c + j];
        }
      }
      if (grads.fc1_bias) {
        const Share mine(f, t, threads);
        for (int64_t r = 0; r < n; ++r) {
          for (int64_t j = mine.begin; j < mine.end; ++j) grads.fc1_bias[j] += d_hidden[r * f + j];
        }
      }
      // The next block overwrites d_hidden.
#pragma omp barrier
    }
  }
  for (int64_t j = 0; j < c; ++j) {
    T weight_sum = 0, bias_sum = 0;
    for (int64_t u = 0; u < units; ++u) {
      weight_sum += norm_sums[u * 2 * c + j];
      bias_sum += norm_sums[(u * 2 + 1) * c + j];
    }
    if (grads.norm_weight) grads.norm_weight[j] = weight_sum;
    if (grads.norm_bias) grads.norm_bias[j] = bias_sum;
  }
}

template void feed_forward_forward<float>(const FeedForwardParams<float>&, const float*, float*,
                                          const FeedForwardSaved<float>&);
template void feed_forward_forward<double>(const FeedForwardParams<double>&, const double*, double*,
                                           const FeedForwardSaved<double>&);
template void feed_forward_backward<float>(const FeedForwardParams<float>&, const float*,
                                           const FeedForwardSaved<float>&, const float*,
                                           const FeedForwardGrads<float>&);
template void feed_forward_backward<double>(const FeedForwardParams<double>&, const double*,
                                            const FeedForwardSaved<double>&, const double*,
                                            const FeedForwardGrads<double>&);

}  // namespace gradlab::kernels
