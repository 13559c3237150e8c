// Fused attention: per (batch, head) small GEMMs on strided views of [B, T, H, D] buffers,
// with scaling, masking and softmax fused in between. Backward (per (batch, K/V head), so that
// the heads sharing a K/V head accumulate into it without races):
//   dV += W^T dO,  dW = dO V^T,  dS = s W * (dW - rowsum(dW * W)),  dQ = dS K,  dK += dS^T Q
#include "autograd/attention.h"

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "autograd/attention_lanes.h"
#include "autograd/attention_parts.h"
#include "autograd/graph.h"
#include "autograd/kernels/gemm.h"
#include "autograd/kernels/rows.h"

namespace gradlab {
namespace {

using attention::Dims;
using attention::head_at;
using attention::MaskView;
using attention::Operands;
using attention::packed;
using attention::separate;
using attention::worth_threads;

void check_masks(const Dims& d, const AttentionMaskSpec& m) {
  if (m.key_padding && m.key_padding->shape != Shape{d.B, d.Tk}) {
    throw ShapeError("fused_attention: key_padding_mask " + to_string(m.key_padding->shape) +
                     " does not match [B, Tk] = " + to_string({d.B, d.Tk}));
  }
  const Shape full{d.B, d.H, d.Tq, d.Tk};
  if (m.attn_mask && broadcast_shapes("fused_attention", m.attn_mask->shape, full) != full) {
    throw ShapeError("fused_attention: attn_mask " + to_string(m.attn_mask->shape) +
                     " does not broadcast to [B, H, Tq, Tk] = " + to_string(full));
  }
}

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
  check_masks(d, m);
  return d;
}

Dims check_packed_shape(const Tensor& qkv, int64_t num_heads, int64_t num_kv_heads,
                        const AttentionMaskSpec& m) {
  if (qkv.rank() != 4 || num_heads <= 0 || num_kv_heads <= 0 || num_heads % num_kv_heads != 0 ||
      qkv.size(2) != num_heads + 2 * num_kv_heads) {
    throw ShapeError("fused_attention_packed: qkv " + to_string(qkv.shape()) +
                     " is not [B, T, H + 2 KV, D] with H = " + std::to_string(num_heads) +
                     " query heads and KV = " + std::to_string(num_kv_heads) +
                     " K/V heads dividing them");
  }
  const Dims d{qkv.size(0), qkv.size(1), qkv.size(1), num_heads, num_kv_heads, qkv.size(3)};
  check_masks(d, m);
  return d;
}

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
    const T total = kernels::sum_over<T>(n, [&](int64_t j) { return s[j]; });
    if (total == 0) continue;  // fully masked
    const T inv = 1 / total;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) s[j] *= inv;
  }
}

template <class T>
void forward(const Operands<const T>& in, const Dims& d, const MaskView& mask, T scale, T* out,
             T* weights) {
#pragma omp parallel for if (worth_threads(d)) schedule(static)
  for (int64_t bh = 0; bh < d.B * d.H; ++bh) {
    const int64_t b = bh / d.H, h = bh % d.H, g = h / d.group();
    const T* q = head_at(in.q, in.q_stride, d.Tq, b, h, d.D);
    const T* k = head_at(in.k, in.kv_stride, d.Tk, b, g, d.D);
    const T* v = head_at(in.v, in.kv_stride, d.Tk, b, g, d.D);
    T* w = weights + bh * d.Tq * d.Tk;  // [Tq, Tk]
    kernels::gemm<T>(d.Tq, d.Tk, d.D, {q, in.q_stride, false},
                     {k, in.kv_stride, /*transposed=*/true}, w, d.Tk, false, nullptr, false);
    masked_softmax(w, d.Tq, d.Tk, scale, mask, b, h);
    kernels::gemm<T>(d.Tq, d.D, d.Tk, {w, d.Tk, false}, {v, in.kv_stride, false},
                     head_at(out, d.H * d.D, d.Tq, b, h, d.D), d.H * d.D, false, nullptr, false);
  }
}

// g: the output's gradient, [B, Tq, H, D]. The inputs' gradients go to `grad`, laid out as the
// inputs are.
template <class T>
void backward(const T* g, const Operands<const T>& in, const T* weights, const Dims& d, T scale,
              const Operands<T>& grad) {
  const int64_t g_stride = d.H * d.D;
#pragma omp parallel for if (worth_threads(d)) schedule(static)
  for (int64_t bg = 0; bg < d.B * d.KV; ++bg) {
    const int64_t b = bg / d.KV, kvh = bg % d.KV;
    thread_local std::vector<T> ds_buffer;  // reused across calls: no allocation in steady state
    ds_buffer.resize(d.Tq * d.Tk);
    T* ds = ds_buffer.data();  // [Tq, Tk]
    const T* k = head_at(in.k, in.kv_stride, d.Tk, b, kvh, d.D);
    const T* v = head_at(in.v, in.kv_stride, d.Tk, b, kvh, d.D);
    T* dk = head_at(grad.k, grad.kv_stride, d.Tk, b, kvh, d.D);
    T* dv = head_at(grad.v, grad.kv_stride, d.Tk, b, kvh, d.D);
    for (int64_t h = kvh * d.group(); h < (kvh + 1) * d.group(); ++h) {
      // The first head of the group writes dK and dV, the others add to them.
      const bool accumulate = h > kvh * d.group();
      const T* w = weights + (b * d.H + h) * d.Tq * d.Tk;  // [Tq, Tk]
      const T* go = head_at(g, g_stride, d.Tq, b, h, d.D);
      const T* q = head_at(in.q, in.q_stride, d.Tq, b, h, d.D);
      kernels::gemm<T>(d.Tk, d.D, d.Tq, {w, d.Tk, true}, {go, g_stride, false}, dv, grad.kv_stride,
                       accumulate, nullptr, false);
      kernels::gemm<T>(d.Tq, d.Tk, d.D, {go, g_stride, false},
                       {v, in.kv_stride, /*transposed=*/true}, ds, d.Tk, false, nullptr,
                       false);  // dW
      for (int64_t i = 0; i < d.Tq; ++i) {
        T* ds_row = ds + i * d.Tk;
        const T* w_row = w + i * d.Tk;
        const T dot = kernels::sum_over<T>(d.Tk, [&](int64_t j) { return ds_row[j] * w_row[j]; });
        for (int64_t j = 0; j < d.Tk; ++j) ds_row[j] = scale * w_row[j] * (ds_row[j] - dot);
      }
      kernels::gemm<T>(d.Tq, d.D, d.Tk, {ds, d.Tk, false}, {k, in.kv_stride, false},
                       head_at(grad.q, grad.q_stride, d.Tq, b, h, d.D), grad.q_stride, false,
                       nullptr, false);
      kernels::gemm<T>(d.Tk, d.D, d.Tq, {ds, d.Tk, true}, {q, in.q_stride, false}, dk,
                       grad.kv_stride, accumulate, nullptr, false);
    }
  }
}

// Runs the forward pass on the operands `layout` finds in `inputs`, and records a backward that
// writes their gradients in the same layout.
template <class Layout>
FusedAttention run(const std::vector<Tensor>& inputs, const Dims& d, const AttentionMaskSpec& mask,
                   double scale, bool need_weights, Layout layout) {
  const Tensor& first = inputs.front();
  const MaskView view(mask, d);
  bool lanes = false;
  int64_t saved_size = 0;
  dispatch(first.dtype(), [&]<class T>() {
    lanes = attention::lanes_fit<T>(d);
    if (lanes) saved_size = attention::lanes_saved_size<T>(d);
  });
  Tensor out = Tensor::empty({d.B, d.Tq, d.H, d.D}, first.dtype());
  // The per-head kernel's backward reads the weights; the lane kernel's reads what it saved.
  Tensor weights =
      need_weights || !lanes ? Tensor::empty({d.B, d.H, d.Tq, d.Tk}, first.dtype()) : Tensor();
  Tensor saved = lanes ? Tensor::empty({saved_size}, first.dtype()) : weights;
  dispatch(first.dtype(), [&]<class T>() {
    const auto operands = layout.template of<const T>(inputs);
    T* w = weights.defined() ? weights.data<T>() : nullptr;
    if (lanes) {
      attention::lanes_forward<T>(operands, d, view, static_cast<T>(scale), out.data<T>(), w,
                                  saved.data<T>());
    } else {
      forward<T>(operands, d, view, static_cast<T>(scale), out.data<T>(), w);
    }
  });
  out = record("fused_attention", out, inputs,
               [inputs, saved, lanes, d, causal = mask.causal, scale, layout](const Tensor& g) {
                 std::vector<Tensor> grads;
                 for (const Tensor& input : inputs)
                   grads.push_back(Tensor::empty(input.shape(), input.dtype()));
                 dispatch(g.dtype(), [&]<class T>() {
                   const auto grad_operands = layout.template of<T>(grads);
                   if (lanes) {
                     attention::lanes_backward<T>(g.data<T>(), saved.data<T>(), d, causal,
                                                  static_cast<T>(scale), grad_operands);
                   } else {
                     backward<T>(g.data<T>(), layout.template of<const T>(inputs), saved.data<T>(),
                                 d, static_cast<T>(scale), grad_operands);
                   }
                 });
                 return grads;
               });
  return {out, need_weights ? weights : Tensor()};
}

// T is float or const float (then the tensors may be const), and the same for double.
struct SeparateLayout {
  Dims d;
  template <class T, class Tensors>
  Operands<T> of(Tensors& t) const {
    using Value = std::remove_const_t<T>;
    return separate<T>(t[0].template data<Value>(), t[1].template data<Value>(),
                       t[2].template data<Value>(), d);
  }
};

struct PackedLayout {
  Dims d;
  template <class T, class Tensors>
  Operands<T> of(Tensors& t) const {
    return packed<T>(t[0].template data<std::remove_const_t<T>>(), d);
  }
};

}  // namespace

FusedAttention fused_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                               const AttentionMaskSpec& mask, double scale, bool need_weights) {
  const Dims d = check_shapes(q, k, v, mask);
  return run({q, k, v}, d, mask, scale, need_weights, SeparateLayout{d});
}

FusedAttention fused_attention_packed(const Tensor& qkv, int64_t num_heads, int64_t num_kv_heads,
                                      const AttentionMaskSpec& mask, double scale,
                                      bool need_weights) {
  const Dims d = check_packed_shape(qkv, num_heads, num_kv_heads, mask);
  return run({qkv}, d, mask, scale, need_weights, PackedLayout{d});
}

}  // namespace gradlab
