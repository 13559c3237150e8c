// One SIMD lane per head (see attention_lanes.h). Per lane group, with L = kLanes heads:
//   forward, per query i:  s = K q_i * scale (keys j < visible(i)), masked softmax, o_i = s V
//   backward:  dW_i = V dO_i,  dS_i = s W_i * (dW_i - <dW_i, W_i>),  dQ_i = dS_i K,
//              dV_j = sum_i W_ij dO_i,  dK_j = sum_i dS_ij Q_i  (rows i >= j under the causal rule)
#include "autograd/kernels/attention_lanes.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "autograd/kernels/elementwise.h"
#include "autograd/kernels/kernel_list.h"
#include "autograd/kernels/rows.h"
#include "autograd/kernels/simd.h"
#include "autograd/kernels/softmax.h"

namespace gradlab::kernels {
namespace {

using simd::kLanes;
using simd::load_first;
using simd::store_first;
using simd::transpose_block;
using simd::Vec;

// Vectors per register block in the two product loops: that many independent accumulators
// keep both FMA units busy (each FMA waits 4 cycles for its previous result).
constexpr int64_t kBlock = 8;
// The problems the lane kernel takes: those where it beats the per-head GEMM on forward and
// backward of causal self-attention (short sequences of narrow heads; the limits follow the
// measurement in BENCHMARKS.md, "Attention"). Bounding Tq x Tk keeps the backward's weight
// arrays (Tq x Tk vectors each) in the second-level cache.
constexpr int64_t kMaxKeys = 64;
constexpr int64_t kMaxKeyElements = 1024;  // Tk x D
constexpr int64_t kMaxScores = 4096;       // Tq x Tk

int64_t round_up(int64_t n, int64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

// The query heads of one lane group and their array sizes. Lane n < count is query head
// first + n (counting b * H + h); D and Tk are padded with zeros to whole transposes and blocks.
template <class T>
struct Group {
  int64_t index, count;
  int64_t b[kLanes<T>], h[kLanes<T>];
  int64_t Dp, Tkp;

  Group(const AttentionDims& d, int64_t index_, int64_t first, int64_t heads)
      : index(index_),
        count(heads),
        Dp(round_up(d.D, std::max<int64_t>(kLanes<T>, kBlock))),
        Tkp(round_up(d.Tk, std::max<int64_t>(kLanes<T>, kBlock))) {
    for (int64_t n = 0; n < count; ++n) {
      b[n] = (first + n) / d.H;
      h[n] = (first + n) % d.H;
    }
  }
};

// What the forward keeps of each lane group for the backward, in lanes: Q [Tq, Dp], K and V
// [Tkp, Dp] and the weights [Tq, Tkp]. The products read K and V up to the block after row Tk
// (those rows zero), the weights up to the visible keys (zero from there to Tk, where a caller
// may read them out); the padding past that is never used, so it is not zeroed.
template <class T>
struct Saved {
  Vec<T>*q, *k, *v, *w;

  static int64_t vectors(const AttentionDims& d, const Group<T>& g) {
    return d.Tq * g.Dp + 2 * g.Tkp * g.Dp + d.Tq * g.Tkp;
  }
  Saved(T* base, const AttentionDims& d, const Group<T>& g) {
    q = reinterpret_cast<Vec<T>*>(base) + g.index * vectors(d, g);
    k = q + d.Tq * g.Dp;
    v = k + g.Tkp * g.Dp;
    w = v + g.Tkp * g.Dp;
  }
};

// rows x cols elements of each lane's matrix (lane n's at base[n], rows `stride` apart) into
// dst, rows of dst_cols vectors: dst[r * dst_cols + c] holds element (r, c) of every lane.
// Columns from cols to dst_cols, and lanes from count on, are zero.
template <class T>
void to_lanes(const T* const* base, int64_t count, int64_t rows, int64_t cols, int64_t stride,
              Vec<T>* dst, int64_t dst_cols) {
  constexpr int L = kLanes<T>;
  for (int64_t r = 0; r < rows; ++r) {
    Vec<T>* row = dst + r * dst_cols;
    int64_t c0 = 0;
    for (; c0 < cols; c0 += L) {
      const int64_t width = std::min<int64_t>(L, cols - c0);
      Vec<T> block[L];
      for (int n = 0; n < L; ++n)
        block[n] = n < count ? load_first<T>(base[n] + r * stride + c0, width) : Vec<T>{};
      transpose_block<T>(block);
      for (int c = 0; c < L; ++c) row[c0 + c] = block[c];
    }
    for (; c0 < dst_cols; ++c0) row[c0] = Vec<T>{};
  }
}

// The inverse for rows x cols elements of the first `count` lanes; a lane with add[n] set adds
// to what is at base[n] instead of overwriting it.
template <class T>
void from_lanes(const Vec<T>* src, int64_t src_cols, int64_t count, int64_t rows, int64_t cols,
                int64_t stride, T* const* base, const bool* add) {
  constexpr int L = kLanes<T>;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c0 = 0; c0 < cols; c0 += L) {
      const int64_t width = std::min<int64_t>(L, cols - c0);
      Vec<T> block[L];
      for (int c = 0; c < L; ++c) block[c] = src[r * src_cols + c0 + c];
      transpose_block<T>(block);
      for (int64_t n = 0; n < count; ++n) {
        T* p = base[n] + r * stride + c0;
        store_first<T>(p, add && add[n] ? load_first<T>(p, width) + block[n] : block[n], width);
      }
    }
  }
}

// out[j] = sum over d of x[d] * rows[j * depth + d], for j < n rounded up to a block (rows has
// that many rows). The sum runs over d in order, as the GEMM's does.
template <class T>
void dots(const Vec<T>* x, const Vec<T>* rows, int64_t n, int64_t depth, Vec<T>* out) {
  for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
    Vec<T> acc[kBlock] = {};
    for (int64_t d = 0; d < depth; ++d) {
      const Vec<T> xd = x[d];
      for (int64_t j = 0; j < kBlock; ++j) acc[j] += xd * rows[(j0 + j) * depth + d];
    }
    for (int64_t j = 0; j < kBlock; ++j) out[j0 + j] = acc[j];
  }
}

// out[0, width) = sum over r in [first, last) of coef[r * coef_stride] * rows[r * width + ...],
// width a whole number of blocks, the sum over r in order.
template <class T>
void weighted_sum(const Vec<T>* coef, int64_t coef_stride, const Vec<T>* rows, int64_t first,
                  int64_t last, int64_t width, Vec<T>* out) {
  for (int64_t d0 = 0; d0 < width; d0 += kBlock) {
    Vec<T> acc[kBlock] = {};
    for (int64_t r = first; r < last; ++r) {
      const Vec<T> c = coef[r * coef_stride];
      for (int64_t d = 0; d < kBlock; ++d) acc[d] += c * rows[r * width + d0 + d];
    }
    for (int64_t d = 0; d < kBlock; ++d) out[d0 + d] = acc[d];
  }
}

// Keys query i may see before the explicit masks: all, or j <= i under the causal rule.
int64_t visible(const AttentionDims& d, bool causal, int64_t i) {
  return causal ? std::min(i + 1, d.Tk) : d.Tk;
}

// Query i's scores s[0, n) of every lane in place: scale, explicit masks, softmax (a fully
// masked lane gives zeros); s[n, keys) become zero.
template <class T>
void softmax_row(Vec<T>* s, int64_t n, int64_t keys, T scale, const AttentionMask& mask,
                 const Group<T>& group, int64_t i) {
  constexpr T minus_inf = -std::numeric_limits<T>::infinity();
  for (int64_t j = 0; j < n; ++j) s[j] *= scale;
  if (mask.has_explicit()) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t lane = 0; lane < group.count; ++lane) {
        if (mask.hides_explicitly(group.b[lane], group.h[lane], i, j)) s[j][lane] = minus_inf;
      }
    }
  }
  Vec<T> top = Vec<T>{} + minus_inf;
  for (int64_t j = 0; j < n; ++j) top = s[j] > top ? s[j] : top;
  top = top == minus_inf ? Vec<T>{} : top;  // fully masked: exp(-inf - 0) = 0, not NaN
  for (int64_t j = 0; j < n; ++j) s[j] -= top;
  exp_shifted(reinterpret_cast<T*>(s), reinterpret_cast<T*>(s), n * kLanes<T>, T(0));
  Vec<T> total{};
  for (int64_t j = 0; j < n; ++j) total += s[j];
  const Vec<T> inverse = total > 0 ? 1 / total : Vec<T>{};
  for (int64_t j = 0; j < n; ++j) s[j] *= inverse;
  for (int64_t j = n; j < keys; ++j) s[j] = Vec<T>{};
}

// Per-lane pointers to the [T, D] rows of each lane's head in an operand: its query head, or
// (kv set) the K/V head it reads.
template <class P, class T>
void heads_of(const Group<T>& group, const AttentionDims& d, P* base, int64_t stride, int64_t T_,
              bool kv, P** out) {
  for (int64_t n = 0; n < group.count; ++n) {
    const int64_t head = kv ? group.h[n] / d.group() : group.h[n];
    out[n] = head_at(base, stride, T_, group.b[n], head, d.D);
  }
}

// Slot `slot` of this thread's scratch arrays, `vectors` long. They only grow: no allocation
// in steady state.
template <class T>
Vec<T>* scratch(int slot, int64_t vectors) {
  thread_local std::vector<T> buffers[3];
  return reinterpret_cast<Vec<T>*>(simd::aligned_scratch(buffers[slot], vectors * kLanes<T>));
}

// Query heads per lane group: whole groups of heads sharing a K/V head, so that one lane group
// holds every head that adds to a given dK and dV.
template <class T>
int64_t heads_per_group(const AttentionDims& d) {
  return kLanes<T> / d.group() * d.group();
}

template <class T, class Body>
void for_groups(const AttentionDims& d, Body body) {
  const int64_t per_group = heads_per_group<T>(d), heads = d.B * d.H;
  const int64_t groups = (heads + per_group - 1) / per_group;
  for_each_index(groups, groups > 1 && attention_worth_threads(d), [&](int64_t g) {
    const int64_t first = g * per_group;
    body(Group<T>(d, g, first, std::min(per_group, heads - first)));
  });
}

}  // namespace

template <class T>
bool attention_lanes_fit(const AttentionDims& d) {
  return d.group() <= kLanes<T> && d.Tk <= kMaxKeys && d.Tk * d.D <= kMaxKeyElements &&
         d.Tq * d.Tk <= kMaxScores;
}

template <class T>
int64_t attention_lanes_saved_size(const AttentionDims& d) {
  const int64_t per_group = heads_per_group<T>(d);
  const int64_t groups = (d.B * d.H + per_group - 1) / per_group;
  return groups * Saved<T>::vectors(d, Group<T>(d, 0, 0, 0)) * kLanes<T>;
}

template <class T>
void attention_lanes_forward(const AttentionOperands<const T>& in, const AttentionDims& d,
                             const AttentionMask& mask, T scale, T* out, T* weights, T* saved) {
  for_groups<T>(d, [&](const Group<T>& group) {
    constexpr int L = kLanes<T>;
    const int64_t Dp = group.Dp, Tkp = group.Tkp;
    const Saved<T> keep(saved, d, group);
    const T* q[L];
    const T* k[L];
    const T* v[L];
    T* o[L];
    heads_of(group, d, in.q, in.q_stride, d.Tq, false, q);
    heads_of(group, d, in.k, in.kv_stride, d.Tk, true, k);
    heads_of(group, d, in.v, in.kv_stride, d.Tk, true, v);
    heads_of(group, d, out, d.H * d.D, d.Tq, false, o);
    Vec<T>* o_row = scratch<T>(0, Dp);
    to_lanes<T>(q, group.count, d.Tq, d.D, in.q_stride, keep.q, Dp);
    to_lanes<T>(k, group.count, d.Tk, d.D, in.kv_stride, keep.k, Dp);
    to_lanes<T>(v, group.count, d.Tk, d.D, in.kv_stride, keep.v, Dp);
    const int64_t read_rows = round_up(d.Tk, kBlock);  // the rows dots() reads
    std::fill(keep.k + d.Tk * Dp, keep.k + read_rows * Dp, Vec<T>{});
    std::fill(keep.v + d.Tk * Dp, keep.v + read_rows * Dp, Vec<T>{});
    for (int64_t i = 0; i < d.Tq; ++i) {
      const int64_t n = visible(d, mask.causal(), i);
      Vec<T>* s = keep.w + i * Tkp;
      dots<T>(keep.q + i * Dp, keep.k, n, Dp, s);
      softmax_row<T>(s, n, d.Tk, scale, mask, group, i);
      weighted_sum<T>(s, 1, keep.v, 0, n, Dp, o_row);
      T* out_row[L];
      for (int64_t lane = 0; lane < group.count; ++lane) out_row[lane] = o[lane] + i * d.H * d.D;
      from_lanes<T>(o_row, Dp, group.count, 1, d.D, 0, out_row, nullptr);
    }
    if (weights) {
      T* w[L];
      for (int64_t n = 0; n < group.count; ++n)
        w[n] = weights + (group.b[n] * d.H + group.h[n]) * d.Tq * d.Tk;
      from_lanes<T>(keep.w, Tkp, group.count, d.Tq, d.Tk, d.Tk, w, nullptr);
    }
  });
}

template <class T>
void attention_lanes_backward(const T* g, const T* saved, const AttentionDims& d, bool causal,
                              T scale, const AttentionOperands<T>& grad) {
  for_groups<T>(d, [&](const Group<T>& group) {
    constexpr int L = kLanes<T>;
    const int64_t Dp = group.Dp, Tkp = group.Tkp;
    const Saved<T> keep(const_cast<T*>(saved), d, group);
    const T* go[L];
    T* dq[L];
    T* dk[L];
    T* dv[L];
    bool add[L];  // heads after the first of a K/V group add to its dK and dV
    heads_of(group, d, g, d.H * d.D, d.Tq, false, go);
    heads_of(group, d, grad.q, grad.q_stride, d.Tq, false, dq);
    heads_of(group, d, grad.k, grad.kv_stride, d.Tk, true, dk);
    heads_of(group, d, grad.v, grad.kv_stride, d.Tk, true, dv);
    for (int64_t n = 0; n < group.count; ++n) add[n] = group.h[n] % d.group() != 0;
    Vec<T>* grad_out = scratch<T>(0, d.Tq * Dp);
    Vec<T>* ds = scratch<T>(1, d.Tq * Tkp);  // [Tq, Tkp], first dW, then dS
    Vec<T>* row = scratch<T>(2, Dp);         // one row of a gradient
    to_lanes<T>(go, group.count, d.Tq, d.D, d.H * d.D, grad_out, Dp);
    for (int64_t i = 0; i < d.Tq; ++i) {
      const int64_t n = visible(d, causal, i);
      const Vec<T>* w_i = keep.w + i * Tkp;
      Vec<T>* ds_i = ds + i * Tkp;
      // dW_i, then dS_i, over the visible keys only: key j's gradients read rows i >= j.
      dots<T>(grad_out + i * Dp, keep.v, n, Dp, ds_i);
      softmax_backward_row(w_i, ds_i, ds_i, n, 1, scale);
      weighted_sum<T>(ds_i, 1, keep.k, 0, n, Dp, row);  // dQ_i
      T* dq_row[L];
      for (int64_t lane = 0; lane < group.count; ++lane)
        dq_row[lane] = dq[lane] + i * grad.q_stride;
      from_lanes<T>(row, Dp, group.count, 1, d.D, 0, dq_row, nullptr);
    }
    for (int64_t j = 0; j < d.Tk; ++j) {
      const int64_t first = causal ? j : 0;  // the rows whose weight on key j may be nonzero
      T* dk_row[L];
      T* dv_row[L];
      for (int64_t lane = 0; lane < group.count; ++lane) {
        dk_row[lane] = dk[lane] + j * grad.kv_stride;
        dv_row[lane] = dv[lane] + j * grad.kv_stride;
      }
      weighted_sum<T>(keep.w + j, Tkp, grad_out, first, d.Tq, Dp, row);  // dV_j
      from_lanes<T>(row, Dp, group.count, 1, d.D, 0, dv_row, add);
      weighted_sum<T>(ds + j, Tkp, keep.q, first, d.Tq, Dp, row);  // dK_j
      from_lanes<T>(row, Dp, group.count, 1, d.D, 0, dk_row, add);
    }
  });
}

GRADLAB_ATTENTION_LANES_KERNELS(GRADLAB_INSTANTIATE_KERNEL)

}  // namespace gradlab::kernels
