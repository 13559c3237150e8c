// Per (batch, head): S = Q K^T (a GEMM on the strided views), scale, mask and softmax in place,
// then O = W V. Backward per (batch, K/V head), so that the heads sharing a K/V head accumulate
// into it without races:
//   dV += W^T dO,  dW = dO V^T,  dS = s W * (dW - rowsum(dW * W)),  dQ = dS K,  dK += dS^T Q
#include "autograd/kernels/attention.h"

#include <limits>
#include <vector>

#include "autograd/kernels/gemm.h"
#include "autograd/kernels/rows.h"
#include "autograd/kernels/softmax.h"

namespace gradlab::kernels {
namespace {

// In place over the [Tq, Tk] scores of one head: scale, mask, then softmax along each row (a
// fully masked row gives zeros). The exponentials run once over the whole block: row by row,
// short rows (20 to 64 scores) cost more in call overhead than in arithmetic.
template <class T>
void masked_softmax(T* w, int64_t rows, int64_t n, T scale, const AttentionMask& mask, int64_t b,
                    int64_t h) {
  constexpr T minus_inf = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < rows; ++i) {
    T* s = w + i * n;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) s[j] *= scale;
    mask.apply(s, b, h, i);
    const T m = max_of(s, n);
    if (m == minus_inf) continue;  // fully masked: stays -inf, and exp gives zeros
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) s[j] -= m;
  }
  exp_shifted(w, w, rows * n, T(0));
  for (int64_t i = 0; i < rows; ++i) {
    T* s = w + i * n;
    const T total = sum_over<T>(n, [&](int64_t j) { return s[j]; });
    if (total == 0) continue;  // fully masked
    const T inv = 1 / total;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) s[j] *= inv;
  }
}

}  // namespace

template <class T>
void attention_forward(const AttentionOperands<const T>& in, const AttentionDims& d,
                       const AttentionMask& mask, T scale, T* out, T* weights) {
#pragma omp parallel for if (attention_worth_threads(d)) schedule(static)
  for (int64_t bh = 0; bh < d.B * d.H; ++bh) {
    const int64_t b = bh / d.H, h = bh % d.H, g = h / d.group();
    const T* q = in.q_head(d, b, h);
    const T* k = in.k_head(d, b, g);
    const T* v = in.v_head(d, b, g);
    T* w = weights + bh * d.Tq * d.Tk;  // [Tq, Tk]
    gemm<T>(d.Tq, d.Tk, d.D, {q, in.q_stride, false}, {k, in.kv_stride, /*transposed=*/true}, w,
            d.Tk, false, nullptr, false);
    masked_softmax(w, d.Tq, d.Tk, scale, mask, b, h);
    gemm<T>(d.Tq, d.D, d.Tk, {w, d.Tk, false}, {v, in.kv_stride, false},
            head_at(out, d.H * d.D, d.Tq, b, h, d.D), d.H * d.D, false, nullptr, false);
  }
}

template <class T>
void attention_backward(const T* g, const AttentionOperands<const T>& in, const T* weights,
                        const AttentionDims& d, T scale, const AttentionOperands<T>& grad) {
  const int64_t g_stride = d.H * d.D;
#pragma omp parallel for if (attention_worth_threads(d)) schedule(static)
  for (int64_t bg = 0; bg < d.B * d.KV; ++bg) {
    const int64_t b = bg / d.KV, kvh = bg % d.KV;
    thread_local std::vector<T> ds_buffer;  // reused across calls: no allocation in steady state
    ds_buffer.resize(d.Tq * d.Tk);
    T* ds = ds_buffer.data();  // [Tq, Tk]
    const T* k = in.k_head(d, b, kvh);
    const T* v = in.v_head(d, b, kvh);
    T* dk = grad.k_head(d, b, kvh);
    T* dv = grad.v_head(d, b, kvh);
    for (int64_t h = kvh * d.group(); h < (kvh + 1) * d.group(); ++h) {
      // The first head of the group writes dK and dV, the others add to them.
      const bool accumulate = h > kvh * d.group();
      const T* w = weights + (b * d.H + h) * d.Tq * d.Tk;  // [Tq, Tk]
      const T* go = head_at(g, g_stride, d.Tq, b, h, d.D);
      const T* q = in.q_head(d, b, h);
      gemm<T>(d.Tk, d.D, d.Tq, {w, d.Tk, true}, {go, g_stride, false}, dv, grad.kv_stride,
              accumulate, nullptr, false);
      // dW = dO V^T, in ds until it becomes dS
      gemm<T>(d.Tq, d.Tk, d.D, {go, g_stride, false}, {v, in.kv_stride, /*transposed=*/true}, ds,
              d.Tk, false, nullptr, false);
      for (int64_t i = 0; i < d.Tq; ++i) {
        softmax_backward_row(w + i * d.Tk, ds + i * d.Tk, ds + i * d.Tk, d.Tk, 1, scale);
      }
      gemm<T>(d.Tq, d.D, d.Tk, {ds, d.Tk, false}, {k, in.kv_stride, false}, grad.q_head(d, b, h),
              grad.q_stride, false, nullptr, false);
      gemm<T>(d.Tk, d.D, d.Tq, {ds, d.Tk, true}, {q, in.q_stride, false}, dk, grad.kv_stride,
              accumulate, nullptr, false);
    }
  }
}

template void attention_forward<float>(const AttentionOperands<const float>&, const AttentionDims&,
                                       const AttentionMask&, float, float*, float*);
template void attention_forward<double>(const AttentionOperands<const double>&,
                                        const AttentionDims&, const AttentionMask&, double, double*,
                                        double*);
template void attention_backward<float>(const float*, const AttentionOperands<const float>&,
                                        const float*, const AttentionDims&, float,
                                        const AttentionOperands<float>&);
template void attention_backward<double>(const double*, const AttentionOperands<const double>&,
                                         const double*, const AttentionDims&, double,
                                         const AttentionOperands<double>&);

}  // namespace gradlab::kernels
