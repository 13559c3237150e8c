// Fused attention: per (batch, head) small GEMMs on strided views of [B, T, H, D] buffers,
// with masking and softmax fused in between. Backward (per (batch, K/V head), so that the
// heads sharing a K/V head accumulate into it without races):
//   dV += W^T dO,  dW = dO V^T,  dS = W * (dW - rowsum(dW * W)),  dQ = s dS K,  dK += s dS^T Q
#include "autograd/attention.h"

#include <Eigen/Core>
#include <cmath>
#include <limits>

#include "autograd/graph.h"
#include "autograd/kernels.h"

namespace gradlab {
namespace {

template <class T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
// A [rows, D] slice of a [B, T, heads, D] buffer: rows are heads * D apart.
template <class T>
using Strided = Eigen::Map<Matrix<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using ConstStrided = Eigen::Map<const Matrix<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

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

// Whether key j is hidden from query i of (b, h).
class MaskView {
 public:
  MaskView(const AttentionMaskSpec& spec, const Dims& d) : spec_(spec), tk_(d.Tk) {
    if (spec.attn_mask) strides_ = broadcast_strides(spec.attn_mask->shape, {d.B, d.H, d.Tq, d.Tk});
  }
  bool any() const { return spec_.causal || spec_.key_padding || spec_.attn_mask; }
  bool masked(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (spec_.causal && j > i) return true;
    if (spec_.key_padding && spec_.key_padding->values[b * tk_ + j]) return true;
    return spec_.attn_mask &&
           spec_.attn_mask
               ->values[b * strides_[0] + h * strides_[1] + i * strides_[2] + j * strides_[3]];
  }

 private:
  AttentionMaskSpec spec_;
  int64_t tk_;
  Shape strides_;
};

// In place over one row of scores: mask, then softmax (all masked -> zeros).
template <class T>
void masked_softmax_row(T* s, int64_t n, const MaskView& mask, int64_t b, int64_t h, int64_t i) {
  T m = -std::numeric_limits<T>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    if (mask.any() && mask.masked(b, h, i, j)) s[j] = -std::numeric_limits<T>::infinity();
    m = std::max(m, s[j]);
  }
  if (m == -std::numeric_limits<T>::infinity()) {
    std::fill(s, s + n, T(0));
    return;
  }
  T total = 0;
  for (int64_t j = 0; j < n; ++j) total += (s[j] = std::exp(s[j] - m));
  const T inv = 1 / total;
  for (int64_t j = 0; j < n; ++j) s[j] *= inv;
}

bool worth_threads(const Dims& d) {
  return d.B * d.H * d.Tq * d.Tk * d.D > (1 << 16);
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
    const ConstStrided<T> Q(qp + (b * d.Tq * d.H + h) * d.D, d.Tq, d.D,
                            Eigen::OuterStride<>(d.H * d.D));  // [Tq, D]
    const ConstStrided<T> K(kp + (b * d.Tk * d.KV + g) * d.D, d.Tk, d.D,
                            Eigen::OuterStride<>(d.KV * d.D));  // [Tk, D]
    const ConstStrided<T> V(vp + (b * d.Tk * d.KV + g) * d.D, d.Tk, d.D,
                            Eigen::OuterStride<>(d.KV * d.D));   // [Tk, D]
    Eigen::Map<Matrix<T>> W(wp + bh * d.Tq * d.Tk, d.Tq, d.Tk);  // [Tq, Tk]
    W.noalias() = scale * (Q * K.transpose());
    for (int64_t i = 0; i < d.Tq; ++i) masked_softmax_row(W.data() + i * d.Tk, d.Tk, mask, b, h, i);
    Strided<T> O(op + (b * d.Tq * d.H + h) * d.D, d.Tq, d.D, Eigen::OuterStride<>(d.H * d.D));
    O.noalias() = W * V;
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
    const Eigen::OuterStride<> kv_stride(d.KV * d.D), q_stride(d.H * d.D);
    const ConstStrided<T> K(kp + (b * d.Tk * d.KV + kvh) * d.D, d.Tk, d.D, kv_stride);
    const ConstStrided<T> V(vp + (b * d.Tk * d.KV + kvh) * d.D, d.Tk, d.D, kv_stride);
    Strided<T> dK(dkp + (b * d.Tk * d.KV + kvh) * d.D, d.Tk, d.D, kv_stride);
    Strided<T> dV(dvp + (b * d.Tk * d.KV + kvh) * d.D, d.Tk, d.D, kv_stride);
    dK.setZero();
    dV.setZero();
    thread_local Matrix<T> dS;  // reused across calls: no allocation in steady state
    dS.resize(d.Tq, d.Tk);
    for (int64_t h = kvh * d.group(); h < (kvh + 1) * d.group(); ++h) {
      const int64_t offset = (b * d.Tq * d.H + h) * d.D;
      const ConstStrided<T> Q(qp + offset, d.Tq, d.D, q_stride);
      const ConstStrided<T> dO(gp + offset, d.Tq, d.D, q_stride);
      Strided<T> dQ(dqp + offset, d.Tq, d.D, q_stride);
      const Eigen::Map<const Matrix<T>> W(wp + (b * d.H + h) * d.Tq * d.Tk, d.Tq, d.Tk);
      dV.noalias() += W.transpose() * dO;
      dS.noalias() = dO * V.transpose();  // dW
      for (int64_t i = 0; i < d.Tq; ++i) {
        const T dot = dS.row(i).dot(W.row(i));
        dS.row(i) = (W.row(i).array() * (dS.row(i).array() - dot)).matrix();
      }
      dQ.noalias() = scale * (dS * K);
      dK.noalias() += scale * (dS.transpose() * Q);
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
