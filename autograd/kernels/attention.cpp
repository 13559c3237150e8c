// Per (batch, head): S = Q K^T (a GEMM on the strided views), scale, mask and softmax in place,
// then O = W V. Backward per (batch, K/V head), so that the heads sharing a K/V head accumulate
// into it without races:
//   dV += W^T dO,  dW = dO V^T,  dS = s W * (dW - rowsum(dW * W)),  dQ = dS K,  dK += dS^T Q
// Causal attention runs in blocks of kQueryBlock query rows: a block's products stop at the last
// key its rows see, and key j's gradients sum over the queries from j on, so the hidden half of
// [Tq, Tk] is never multiplied nor exponentiated. Each sum skips only exact zeros: the results
// are those of the whole products, bit for bit.
#include "autograd/kernels/attention.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "autograd/kernels/elementwise.h"
#include "autograd/kernels/gemm.h"
#include "autograd/kernels/kernel_list.h"
#include "autograd/kernels/rows.h"
#include "autograd/kernels/simd.h"
#include "autograd/kernels/softmax.h"

namespace gradlab::kernels {
namespace {

// Query rows per block of causal attention: at the char model's 64 positions, blocks of 16
// multiply 160 of every 256 score columns. A whole number of SIMD vectors on every instruction
// set, so a row's sums keep their lanes when they stop at a block's last key.
constexpr int64_t kQueryBlock = 16;

// The [D, Tk] transpose of a head's [Tk, D] rows (K or V), in a per-thread buffer. The products
// with K^T and V^T read it in place: packing the transposed operand inside the GEMM redid the
// transpose for every block of query rows.
template <class T>
struct TransposedHead {
  const T* data;
  int64_t stride;
};

template <class T>
TransposedHead<T> transpose_head(const T* rows, int64_t row_stride, const AttentionDims& d) {
  thread_local std::vector<T> buffer;  // reused across calls: no allocation in steady state
  const int64_t stride = (d.Tk + simd::kLanes<T> - 1) / simd::kLanes<T> * simd::kLanes<T>;
  T* out = simd::aligned_scratch(buffer, d.D * stride);
  simd::transpose<T>(rows, row_stride, d.Tk, d.D, out, stride);
  return {out, stride};
}

// In place over `rows` rows of n scores of one head, from query row i0: scale, mask, then
// softmax along each row (a fully masked row gives zeros). Only the first `keys` scores of a row
// were computed; the causal rule hides the rest, which become zeros. Each pass runs over a group of
// rows before the next starts: one row's maximum, exponentials, sum and division are a chain of
// dependent steps (its 16 to 64 scores are a few vectors), and rows taken one at a time left the
// core waiting on that chain.
template <class T>
void masked_softmax(T* w, int64_t rows, int64_t keys, int64_t n, T scale, const AttentionMask& mask,
                    int64_t b, int64_t h, int64_t i0) {
  using simd::Vec;
  constexpr int64_t lanes = simd::kLanes<T>, group = 8;
  constexpr T minus_inf = -std::numeric_limits<T>::infinity();
  for (int64_t g0 = 0; g0 < rows; g0 += group) {
    const int64_t count = std::min(group, rows - g0);
    // An explicit mask is applied to the scores in place, scaled first; without one the causal
    // rule only shortens a row, and the scale is applied as the scores are read.
    const T read_scale = mask.has_explicit() ? T(1) : scale;
    int64_t visible[group];
    for (int64_t r = 0; r < count; ++r) {
      visible[r] = mask.causal() && !mask.has_explicit() ? std::min(keys, i0 + g0 + r + 1) : keys;
      if (!mask.has_explicit()) continue;
      T* s = w + (g0 + r) * n;
#pragma omp simd
      for (int64_t j = 0; j < keys; ++j) s[j] *= scale;
      mask.apply(s, b, h, i0 + g0 + r, 0, keys);
    }
    // The score j of row r, scaled; -inf past the row's end.
    auto scaled = [&](int64_t r, int64_t j) {
      const T* s = w + (g0 + r) * n;
      return j + lanes <= visible[r]
                 ? simd::load<T>(s + j) * read_scale
                 : simd::load_partial<T>(s + j, visible[r] - j, minus_inf) * read_scale;
    };
    T largest[group];
    for (int64_t r = 0; r < count; ++r) {
      Vec<T> m = Vec<T>{} + minus_inf;
      for (int64_t j = 0; j < visible[r]; j += lanes) {
        const Vec<T> v = scaled(r, j);
        m = m < v ? v : m;
      }
      largest[r] = simd::max_lanes<T>(m);
    }
    T inverse[group] = {};
    for (int64_t r = 0; r < count; ++r) {
      if (largest[r] == minus_inf) {
        visible[r] = 0;  // a row with nothing to see gets zeros
        continue;
      }
      T* s = w + (g0 + r) * n;
      // Whole vectors where the row has room: lanes past `visible` hold exp(-inf) = 0, which
      // add nothing to the sum and are the zeros the row needs there.
      Vec<T> total{};
      for (int64_t j = 0; j < visible[r]; j += lanes) {
        const Vec<T> e = exp_lanes<T>(scaled(r, j) - largest[r]);
        simd::store_first<T>(s + j, e, std::min(lanes, n - j));
        total += e;
      }
      inverse[r] = 1 / simd::sum_lanes<T>(total);
    }
    for (int64_t r = 0; r < count; ++r) {
      T* s = w + (g0 + r) * n;
      for (int64_t j = 0; j < n; j += lanes) {
        const int64_t width = std::min(lanes, n - j);
        const Vec<T> v = j < visible[r] ? simd::load_first<T>(s + j, width) * inverse[r] : Vec<T>{};
        simd::store_first<T>(s + j, v, width);
      }
    }
  }
}

}  // namespace

template <class T>
void attention_forward(const AttentionOperands<const T>& in, const AttentionDims& d,
                       const AttentionMask& mask, T scale, T* out, T* weights) {
  const int64_t block = mask.causal() ? kQueryBlock : d.Tq, out_stride = d.H * d.D;
  for_each_index(d.B * d.H, attention_worth_threads(d), [&](int64_t bh) {
    const int64_t b = bh / d.H, h = bh % d.H, g = h / d.group();
    const T* q = in.q_head(d, b, h);
    const T* k = in.k_head(d, b, g);
    const T* v = in.v_head(d, b, g);
    T* o = head_at(out, out_stride, d.Tq, b, h, d.D);
    const TransposedHead<T> kt = transpose_head(k, in.kv_stride, d);
    for (int64_t i0 = 0; i0 < d.Tq; i0 += block) {
      const int64_t rows = std::min(block, d.Tq - i0);
      const int64_t keys = keys_seen(d, mask.causal(), i0, block);
      T* w = weights + (bh * d.Tq + i0) * d.Tk;  // [rows, Tk]
      gemm<T>(rows, keys, d.D, {q + i0 * in.q_stride, in.q_stride, false},
              {kt.data, kt.stride, false}, w, d.Tk, false, nullptr, false);
      masked_softmax(w, rows, keys, d.Tk, scale, mask, b, h, i0);
      gemm<T>(rows, d.D, keys, {w, d.Tk, false}, {v, in.kv_stride, false}, o + i0 * out_stride,
              out_stride, false, nullptr, false);
    }
  });
}

template <class T>
void attention_backward(const T* g, const AttentionOperands<const T>& in, const T* weights,
                        const AttentionDims& d, bool causal, T scale,
                        const AttentionOperands<T>& grad) {
  const int64_t g_stride = d.H * d.D, block = causal ? kQueryBlock : std::max(d.Tq, d.Tk);
  for_each_index(d.B * d.KV, attention_worth_threads(d), [&](int64_t bg) {
    const int64_t b = bg / d.KV, kvh = bg % d.KV;
    thread_local std::vector<T> ds_buffer;  // reused across calls: no allocation in steady state
    ds_buffer.resize(d.Tq * d.Tk);
    T* ds = ds_buffer.data();  // [Tq, Tk]
    const T* k = in.k_head(d, b, kvh);
    const T* v = in.v_head(d, b, kvh);
    T* dk = grad.k_head(d, b, kvh);
    T* dv = grad.v_head(d, b, kvh);
    const TransposedHead<T> vt = transpose_head(v, in.kv_stride, d);
    for (int64_t h = kvh * d.group(); h < (kvh + 1) * d.group(); ++h) {
      // The first head of the group writes dK and dV, the others add to them.
      const bool accumulate = h > kvh * d.group();
      const T* w = weights + (b * d.H + h) * d.Tq * d.Tk;  // [Tq, Tk]
      const T* go = head_at(g, g_stride, d.Tq, b, h, d.D);
      const T* q = in.q_head(d, b, h);
      T* dq = grad.q_head(d, b, h);
      for (int64_t i0 = 0; i0 < d.Tq; i0 += block) {
        const int64_t rows = std::min(block, d.Tq - i0), keys = keys_seen(d, causal, i0, block);
        T* ds_rows = ds + i0 * d.Tk;
        // dW = dO V^T, in ds until it becomes dS
        gemm<T>(rows, keys, d.D, {go + i0 * g_stride, g_stride, false}, {vt.data, vt.stride, false},
                ds_rows, d.Tk, false, nullptr, false);
        softmax_backward_rows(w + i0 * d.Tk, ds_rows, rows, keys, d.Tk, scale);
        gemm<T>(rows, d.D, keys, {ds_rows, d.Tk, false}, {k, in.kv_stride, false},
                dq + i0 * grad.q_stride, grad.q_stride, false, nullptr, false);
      }
      // Key j is seen by queries from j on (causal), so its sums start there; with blocks
      // aligned to the query blocks above, every dS entry read here was computed.
      for (int64_t j0 = 0; j0 < d.Tk; j0 += block) {
        const int64_t cols = std::min(block, d.Tk - j0), first = causal ? std::min(j0, d.Tq) : 0;
        gemm<T>(cols, d.D, d.Tq - first, {w + first * d.Tk + j0, d.Tk, true},
                {go + first * g_stride, g_stride, false}, dv + j0 * grad.kv_stride, grad.kv_stride,
                accumulate, nullptr, false);
        gemm<T>(cols, d.D, d.Tq - first, {ds + first * d.Tk + j0, d.Tk, true},
                {q + first * in.q_stride, in.q_stride, false}, dk + j0 * grad.kv_stride,
                grad.kv_stride, accumulate, nullptr, false);
      }
    }
  });
}

GRADLAB_ATTENTION_KERNELS(GRADLAB_INSTANTIATE_KERNEL)

}  // namespace gradlab::kernels
