// The tiled kernel of attention_tiles.h. Per thread, a few tiles of scratch: the scores of one
// tile of keys for a block of query rows, their gradient, and the block's partial output.
#include "autograd/kernels/attention_tiles.h"

#include <cmath>
#include <limits>
#include <vector>

#include "autograd/kernels/elementwise.h"
#include "autograd/kernels/gemm.h"
#include "autograd/kernels/kernel_list.h"
#include "autograd/kernels/rows.h"

namespace gradlab::kernels {
namespace {

template <class T>
constexpr T kMinusInf = -std::numeric_limits<T>::infinity();

// s [rows, cols] = Q[i0 : i0 + rows] K[j0 : j0 + cols]^T * scale, hidden entries -inf.
template <class T>
void scores(const T* q, int64_t q_stride, const T* k, int64_t kv_stride, const AttentionDims& d,
            const AttentionMask& mask, T scale, int64_t b, int64_t h, int64_t i0, int64_t rows,
            int64_t j0, int64_t cols, T* s, int64_t ld) {
  gemm<T>(rows, cols, d.D, {q + i0 * q_stride, q_stride, false},
          {k + j0 * kv_stride, kv_stride, /*transposed=*/true}, s, ld, false, nullptr, false);
  for (int64_t r = 0; r < rows; ++r) {
    T* row = s + r * ld;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) row[j] *= scale;
    mask.apply(row, b, h, i0 + r, j0, cols);
  }
}

}  // namespace

template <class T>
void attention_tiles_forward(const AttentionOperands<const T>& in, const AttentionDims& d,
                             const AttentionMask& mask, T scale, T* out, T* lse,
                             const AttentionTiles& tiles) {
  const int64_t bq = tiles.query_rows, bk = tiles.keys, out_stride = d.H * d.D;
  for_each_index(d.B * d.H, attention_worth_threads(d), [&](int64_t bh) {
    const int64_t b = bh / d.H, h = bh % d.H, kvh = h / d.group();
    const T* q = in.q_head(d, b, h);
    const T* k = in.k_head(d, b, kvh);
    const T* v = in.v_head(d, b, kvh);
    T* o = head_at(out, out_stride, d.Tq, b, h, d.D);
    T* row_lse = lse + bh * d.Tq;
    thread_local std::vector<T> s_buffer, acc_buffer, max_buffer, sum_buffer;
    s_buffer.resize(bq * bk);
    acc_buffer.resize(bq * d.D);
    max_buffer.resize(bq);
    sum_buffer.resize(bq);
    T *s = s_buffer.data(), *acc = acc_buffer.data();
    T *m = max_buffer.data(), *l = sum_buffer.data();
    for (int64_t i0 = 0; i0 < d.Tq; i0 += bq) {
      const int64_t rows = std::min(bq, d.Tq - i0), seen = keys_seen(d, mask.causal(), i0, rows);
      std::fill_n(m, rows, kMinusInf<T>);
      std::fill_n(l, rows, T(0));
      std::fill_n(acc, rows * d.D, T(0));
      for (int64_t j0 = 0; j0 < seen; j0 += bk) {
        const int64_t cols = std::min(bk, seen - j0);
        scores(q, in.q_stride, k, in.kv_stride, d, mask, scale, b, h, i0, rows, j0, cols, s, bk);
        for (int64_t r = 0; r < rows; ++r) {
          T* row = s + r * bk;
          const T new_max = std::max(m[r], max_of(row, cols));
          if (new_max == kMinusInf<T>) {  // every key so far hidden: nothing to add
            std::fill_n(row, cols, T(0));
            continue;
          }
          // exp(-inf) is exactly 0 for a row's first visible tile.
          const T rescale = std::exp(m[r] - new_max);
          exp_shifted(row, row, cols, new_max);
          l[r] = l[r] * rescale + sum_over<T>(cols, [&](int64_t j) { return row[j]; });
          m[r] = new_max;
          T* acc_row = acc + r * d.D;
#pragma omp simd
          for (int64_t c = 0; c < d.D; ++c) acc_row[c] *= rescale;
        }
        gemm<T>(rows, d.D, cols, {s, bk, false}, {v + j0 * in.kv_stride, in.kv_stride, false}, acc,
                d.D, /*accumulate=*/true, nullptr, false);
      }
      for (int64_t r = 0; r < rows; ++r) {
        const T inv = l[r] > 0 ? 1 / l[r] : T(0);  // a fully masked row: zeros
        T* o_row = o + (i0 + r) * out_stride;
        const T* acc_row = acc + r * d.D;
#pragma omp simd
        for (int64_t c = 0; c < d.D; ++c) o_row[c] = acc_row[c] * inv;
        row_lse[i0 + r] = l[r] > 0 ? m[r] + std::log(l[r]) : kMinusInf<T>;
      }
    }
  });
}

template <class T>
void attention_tiles_backward(const T* g, const AttentionOperands<const T>& in, const T* out,
                              const T* lse, const AttentionDims& d, const AttentionMask& mask,
                              T scale, const AttentionOperands<T>& grad,
                              const AttentionTiles& tiles) {
  const int64_t bq = tiles.query_rows, bk = tiles.keys, g_stride = d.H * d.D;
  // Per (batch, K/V head), so that the query heads sharing a K/V head add into its dK and dV
  // without races.
  for_each_index(d.B * d.KV, attention_worth_threads(d), [&](int64_t bg) {
    const int64_t b = bg / d.KV, kvh = bg % d.KV;
    const T* k = in.k_head(d, b, kvh);
    const T* v = in.v_head(d, b, kvh);
    T* dk = grad.k_head(d, b, kvh);
    T* dv = grad.v_head(d, b, kvh);
    for (int64_t j = 0; j < d.Tk; ++j) {
      std::fill_n(dk + j * grad.kv_stride, d.D, T(0));
      std::fill_n(dv + j * grad.kv_stride, d.D, T(0));
    }
    thread_local std::vector<T> p_buffer, dp_buffer, delta_buffer;
    p_buffer.resize(bq * bk);
    dp_buffer.resize(bq * bk);
    delta_buffer.resize(d.Tq);
    T *p = p_buffer.data(), *dp = dp_buffer.data(), *delta = delta_buffer.data();
    for (int64_t h = kvh * d.group(); h < (kvh + 1) * d.group(); ++h) {
      const T* q = in.q_head(d, b, h);
      const T* go = head_at(g, g_stride, d.Tq, b, h, d.D);
      const T* o = head_at(out, g_stride, d.Tq, b, h, d.D);
      T* dq = grad.q_head(d, b, h);
      const T* row_lse = lse + (b * d.H + h) * d.Tq;
      // delta_i = rowsum(dP_i * P_i) = dO_i . out_i: the softmax backward's row sums, per row
      // once instead of per tile.
      for (int64_t i = 0; i < d.Tq; ++i) {
        const T* go_row = go + i * g_stride;
        const T* o_row = o + i * g_stride;
        delta[i] = sum_over<T>(d.D, [&](int64_t c) { return go_row[c] * o_row[c]; });
        std::fill_n(dq + i * grad.q_stride, d.D, T(0));
      }
      for (int64_t i0 = 0; i0 < d.Tq; i0 += bq) {
        const int64_t rows = std::min(bq, d.Tq - i0), seen = keys_seen(d, mask.causal(), i0, rows);
        for (int64_t j0 = 0; j0 < seen; j0 += bk) {
          const int64_t cols = std::min(bk, seen - j0);
          scores(q, in.q_stride, k, in.kv_stride, d, mask, scale, b, h, i0, rows, j0, cols, p, bk);
          for (int64_t r = 0; r < rows; ++r) {
            T* row = p + r * bk;
            if (row_lse[i0 + r] == kMinusInf<T>) {  // fully masked: no weights, no gradient
              std::fill_n(row, cols, T(0));
            } else {
              exp_shifted(row, row, cols, row_lse[i0 + r]);
            }
          }
          // dV[j0 : j0 + cols] += P^T dO
          gemm<T>(cols, d.D, rows, {p, bk, true}, {go + i0 * g_stride, g_stride, false},
                  dv + j0 * grad.kv_stride, grad.kv_stride, true, nullptr, false);
          // dP = dO V^T, then dS = P * (dP - delta) * scale in its place
          gemm<T>(rows, cols, d.D, {go + i0 * g_stride, g_stride, false},
                  {v + j0 * in.kv_stride, in.kv_stride, /*transposed=*/true}, dp, bk, false,
                  nullptr, false);
          for (int64_t r = 0; r < rows; ++r) {
            const T* p_row = p + r * bk;
            T* ds_row = dp + r * bk;
            const T row_delta = delta[i0 + r];
#pragma omp simd
            for (int64_t c = 0; c < cols; ++c) {
              ds_row[c] = p_row[c] * (ds_row[c] - row_delta) * scale;
            }
          }
          // dQ[i0 : i0 + rows] += dS K,  dK[j0 : j0 + cols] += dS^T Q
          gemm<T>(rows, d.D, cols, {dp, bk, false}, {k + j0 * in.kv_stride, in.kv_stride, false},
                  dq + i0 * grad.q_stride, grad.q_stride, true, nullptr, false);
          gemm<T>(cols, d.D, rows, {dp, bk, true}, {q + i0 * in.q_stride, in.q_stride, false},
                  dk + j0 * grad.kv_stride, grad.kv_stride, true, nullptr, false);
        }
      }
    }
  });
}

GRADLAB_ATTENTION_TILES_KERNELS(GRADLAB_INSTANTIATE_KERNEL)

}  // namespace gradlab::kernels
