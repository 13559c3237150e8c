// Fused attention: per (batch, head) small GEMMs on strided views of [B, T, H, D] buffers,
// with scaling, masking and softmax fused in between. Backward (per (batch, K/V head), so that
// the heads sharing a K/V head accumulate into it without races):
//   dV += W^T dO,  dW = dO V^T,  dS = s W * (dW - rowsum(dW * W)),  dQ = dS K,  dK += dS^T Q
#include "autograd/attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "autograd/gemm.h"
#include "autograd/graph.h"
#include "autograd/kernels.h"

namespace gradlab {
namespace {

struct Dims {
  int64_t B, Tq, Tk, H, KV, D;
  int64_t group() const { return H / KV; }
};

Dims check_shapes(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMaskSpec& m) {
  auto fail = [&](const std::string& why) {
    throw ShapeError("fused_attention: " + why + ": q " + to_string(q.shape()) + " (B,Tq,H,D), k " +
                     to_string(k.shape()) + ", v " + to_string(v.shape()) + " (B,Tk,KV,D)");
  };
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4) fail("operands must have rank 4");
  if (k.shape() != v.shape()) fail("k and v differ");
  const Dims d{q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3)};
  if (k.size(0) != d.B || k.size(3) != d.D) fail("batch or head size differs");
  if (d.KV == 0 || d.H % d.KV != 0) fail("K/V heads do not divide query heads");
  check_same_dtype("fused_attention", q.dtype(), k.dtype());
  check_same_dtype("fused_attention", q.dtype(), v.dtype());
  if (m.key_padding && m.key_padding->shape != Shape{d.B, d.Tk}) {
    throw ShapeError("fused_attention: key_padding_mask " + to_string(m.key_padding->shape) +
                     " does not match [B, Tk] = " + to_string({d.B, d.Tk}));
  }
  const Shape full{d.B, d.H, d.Tq, d.Tk};
  if (m.attn_mask && broadcast_shapes("fused_attention", m.attn_mask->shape, full) != full) {
    throw ShapeError("fused_attention: attn_mask " + to_string(m.attn_mask->shape) +
                     " does not broadcast to [B, H, Tq, Tk] = " + to_string(full));
  }
  return d;
}

// Which keys each query of (b, h) may not see.
class MaskView {
 public:
  MaskView(const AttentionMaskSpec& spec, const Dims& d) : spec_(spec), tk_(d.Tk) {
    if (spec.attn_mask) strides_ = broadcast_strides(spec.attn_mask->shape, {d.B, d.H, d.Tq, d.Tk});
  }

  // Sets the hidden entries of query i's row of scores (Tk of them) to -inf.
  template <class T>
  void apply(T* row, int64_t b, int64_t h, int64_t i) const {
    constexpr T minus_inf = -std::numeric_limits<T>::infinity();
    if (spec_.causal && i + 1 < tk_) std::fill(row + i + 1, row + tk_, minus_inf);
    if (spec_.key_padding) {
      const uint8_t* padding = spec_.key_padding->values.data() + b * tk_;
      for (int64_t j = 0; j < tk_; ++j) {
        if (padding[j]) row[j] = minus_inf;
      }
    }
    if (spec_.attn_mask) {
      const uint8_t* m =
          spec_.attn_mask->values.data() + b * strides_[0] + h * strides_[1] + i * strides_[2];
      for (int64_t j = 0; j < tk_; ++j) {
        if (m[j * strides_[3]]) row[j] = minus_inf;
      }
    }
  }

 private:
  AttentionMaskSpec spec_;
  int64_t tk_;
  Shape strides_;
};

// In place over the [Tq, Tk] scores of one head: scale, mask, then softmax along each row (a
// fully masked row gives zeros). The exponentials run once over the whole block: row by row,
// short rows (20 to 64 scores) cost more in call overhead than in arithmetic.
template <class T>
void masked_softmax(T* w, int64_t rows, int64_t n, T scale, const MaskView& mask, int64_t b,
                    int64_t h) {
  constexpr T minus_inf = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < rows; ++i) {
    T* s = w + i * n;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) s[j] *= scale;
    mask.apply(s, b, h, i);
    const T m = kernels::max_of(s, n);
    if (m == minus_inf) continue;  // fully masked: stays -inf, and exp gives zeros
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) s[j] -= m;
  }
  kernels::exp_shifted(w, w, rows * n, T(0));
  for (int64_t i = 0; i < rows; ++i) {
    T* s = w + i * n;
    T total = 0;
#pragma omp simd reduction(+ : total)
    for (int64_t j = 0; j < n; ++j) total += s[j];
    if (total == 0) continue;  // fully masked
    const T inv = 1 / total;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) s[j] *= inv;
  }
}

// Multiply-adds of one of the two products, over all heads.
bool worth_threads(const Dims& d) {
  return d.B * d.H * d.Tq * d.Tk * d.D > kernels::kParallelFlops;
}

// [rows, D] slices of the [B, T, heads, D] buffers: rows are heads * D elements apart.
template <class T>
kernels::MatrixRef<T> rows_of(const T* p, int64_t heads, int64_t D, bool transposed = false) {
  return {p, heads * D, transposed};
}

template <class T>
void forward(const Tensor& q, const Tensor& k, const Tensor& v, const Dims& d, const MaskView& mask,
             T scale, Tensor& out, Tensor& weights) {
  const T* qp = q.data<T>();
  const T* kp = k.data<T>();
  const T* vp = v.data<T>();
  T* op = out.data<T>();
  T* wp = weights.data<T>();
#pragma omp parallel for if (worth_threads(d)) schedule(static)
  for (int64_t bh = 0; bh < d.B * d.H; ++bh) {
    const int64_t b = bh / d.H, h = bh % d.H, g = h / d.group();
    const int64_t q_offset = (b * d.Tq * d.H + h) * d.D, kv_offset = (b * d.Tk * d.KV + g) * d.D;
    T* w = wp + bh * d.Tq * d.Tk;  // [Tq, Tk]
    kernels::gemm<T>(d.Tq, d.Tk, d.D, rows_of(qp + q_offset, d.H, d.D),
                     rows_of(kp + kv_offset, d.KV, d.D, /*transposed=*/true), w, d.Tk, false,
                     nullptr, false);
    masked_softmax(w, d.Tq, d.Tk, scale, mask, b, h);
    kernels::gemm<T>(d.Tq, d.D, d.Tk, {w, d.Tk, false}, rows_of(vp + kv_offset, d.KV, d.D),
                     op + q_offset, d.H * d.D, false, nullptr, false);
  }
}

template <class T>
void backward(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v,
              const Tensor& weights, const Dims& d, T scale, Tensor& dq, Tensor& dk, Tensor& dv) {
  const T* gp = g.data<T>();
  const T* qp = q.data<T>();
  const T* kp = k.data<T>();
  const T* vp = v.data<T>();
  const T* wp = weights.data<T>();
  T* dqp = dq.data<T>();
  T* dkp = dk.data<T>();
  T* dvp = dv.data<T>();
#pragma omp parallel for if (worth_threads(d)) schedule(static)
  for (int64_t bg = 0; bg < d.B * d.KV; ++bg) {
    const int64_t b = bg / d.KV, kvh = bg % d.KV;
    const int64_t kv_offset = (b * d.Tk * d.KV + kvh) * d.D, kv_stride = d.KV * d.D;
    thread_local std::vector<T> ds_buffer;  // reused across calls: no allocation in steady state
    ds_buffer.resize(d.Tq * d.Tk);
    T* ds = ds_buffer.data();  // [Tq, Tk]
    for (int64_t h = kvh * d.group(); h < (kvh + 1) * d.group(); ++h) {
      // The first head of the group writes dK and dV, the others add to them.
      const bool accumulate = h > kvh * d.group();
      const int64_t q_offset = (b * d.Tq * d.H + h) * d.D;
      const T* w = wp + (b * d.H + h) * d.Tq * d.Tk;  // [Tq, Tk]
      kernels::gemm<T>(d.Tk, d.D, d.Tq, {w, d.Tk, true}, rows_of(gp + q_offset, d.H, d.D),
                       dvp + kv_offset, kv_stride, accumulate, nullptr, false);
      kernels::gemm<T>(d.Tq, d.Tk, d.D, rows_of(gp + q_offset, d.H, d.D),
                       rows_of(vp + kv_offset, d.KV, d.D, /*transposed=*/true), ds, d.Tk, false,
                       nullptr, false);  // dW
      for (int64_t i = 0; i < d.Tq; ++i) {
        T* ds_row = ds + i * d.Tk;
        const T* w_row = w + i * d.Tk;
        T dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j < d.Tk; ++j) dot += ds_row[j] * w_row[j];
        for (int64_t j = 0; j < d.Tk; ++j) ds_row[j] = scale * w_row[j] * (ds_row[j] - dot);
      }
      kernels::gemm<T>(d.Tq, d.D, d.Tk, {ds, d.Tk, false}, rows_of(kp + kv_offset, d.KV, d.D),
                       dqp + q_offset, d.H * d.D, false, nullptr, false);
      kernels::gemm<T>(d.Tk, d.D, d.Tq, {ds, d.Tk, true}, rows_of(qp + q_offset, d.H, d.D),
                       dkp + kv_offset, kv_stride, accumulate, nullptr, false);
    }
  }
}

}  // namespace

FusedAttention fused_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                               const AttentionMaskSpec& mask, double scale) {
  const Dims d = check_shapes(q, k, v, mask);
  const MaskView view(mask, d);
  Tensor out = Tensor::empty(q.shape(), q.dtype());
  Tensor weights = Tensor::empty({d.B, d.H, d.Tq, d.Tk}, q.dtype());
  dispatch(q.dtype(),
           [&]<class T>() { forward<T>(q, k, v, d, view, static_cast<T>(scale), out, weights); });
  out =
      record("fused_attention", out, {q, k, v}, [q, k, v, w = weights, d, scale](const Tensor& g) {
        Tensor dq = Tensor::empty(q.shape(), q.dtype());
        Tensor dk = Tensor::empty(k.shape(), k.dtype());
        Tensor dv = Tensor::empty(v.shape(), v.dtype());
        dispatch(q.dtype(), [&]<class T>() {
          backward<T>(g, q, k, v, w, d, static_cast<T>(scale), dq, dk, dv);
        });
        return std::vector<Tensor>{dq, dk, dv};
      });
  return {out, weights};
}

}  // namespace gradlab
