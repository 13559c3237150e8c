// The pieces both fused-attention kernels share (attention.h, one GEMM per head;
// attention_lanes.h, one SIMD lane per head): the problem's sizes, where the heads sit in their
// buffers, and the masks. Letters: B batch, Tq queries, Tk keys, H query heads, KV K/V heads
// (dividing H), D head size.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "autograd/shape.h"

namespace gradlab::kernels {

struct AttentionDims {
  int64_t B, Tq, Tk, H, KV, D;
  int64_t group() const { return H / KV; }  // query heads per K/V head
};

// Which keys each query of (b, h) may not see: the causal rule (query i sees keys j <= i), key
// padding ([B, Tk], nonzero = padding) and an explicit mask (attn_mask_shape broadcastable to
// [B, H, Tq, Tk], nonzero = hidden); either array may be null. The arrays must outlive the view.
class AttentionMask {
 public:
  AttentionMask(const AttentionDims& d, bool causal, const uint8_t* key_padding,
                const uint8_t* attn_mask, const Shape& attn_mask_shape)
      : causal_(causal), key_padding_(key_padding), attn_mask_(attn_mask), tk_(d.Tk) {
    if (attn_mask) strides_ = broadcast_strides(attn_mask_shape, {d.B, d.H, d.Tq, d.Tk});
  }

  // Sets the hidden entries of query i's row of scores (Tk of them) to -inf.
  template <class T>
  void apply(T* row, int64_t b, int64_t h, int64_t i) const {
    apply(row, b, h, i, 0, tk_);
  }

  // The same for the `count` scores of keys [first, first + count) of the row, row[0] being
  // key `first`'s (a tile of keys).
  template <class T>
  void apply(T* row, int64_t b, int64_t h, int64_t i, int64_t first, int64_t count) const {
    constexpr T minus_inf = -std::numeric_limits<T>::infinity();
    if (causal_ && i + 1 < first + count) {
      std::fill(row + std::max<int64_t>(i + 1 - first, 0), row + count, minus_inf);
    }
    if (key_padding_) {
      const uint8_t* padding = key_padding_ + b * tk_ + first;
      for (int64_t j = 0; j < count; ++j) {
        if (padding[j]) row[j] = minus_inf;
      }
    }
    if (attn_mask_) {
      const uint8_t* m =
          attn_mask_ + b * strides_[0] + h * strides_[1] + i * strides_[2] + first * strides_[3];
      for (int64_t j = 0; j < count; ++j) {
        if (m[j * strides_[3]]) row[j] = minus_inf;
      }
    }
  }

  bool causal() const { return causal_; }
  // Whether key padding or attn_mask is given, and whether they hide key j from query i of
  // (b, h) (the causal rule aside).
  bool has_explicit() const { return key_padding_ || attn_mask_; }
  bool hides_explicitly(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (key_padding_ && key_padding_[b * tk_ + j]) return true;
    return attn_mask_ &&
           attn_mask_[b * strides_[0] + h * strides_[1] + i * strides_[2] + j * strides_[3]];
  }

 private:
  bool causal_;
  const uint8_t* key_padding_;
  const uint8_t* attn_mask_;
  int64_t tk_;
  Shape strides_;
};

// The keys that query rows [i0, i0 + rows) may see at all: under the causal rule none past the
// block's last row.
inline int64_t keys_seen(const AttentionDims& d, bool causal, int64_t i0, int64_t rows) {
  return causal ? std::min(d.Tk, i0 + rows) : d.Tk;
}

// The heads go to the OpenMP threads above this many multiply-adds of one of the two products
// over all heads. At the copy model's size (1.6 M) a thread per half of the heads still pays
// off; a threshold above it leaves that step slower.
constexpr int64_t kAttentionParallelFlops = 1 << 16;

inline bool attention_worth_threads(const AttentionDims& d) {
  return d.B * d.H * d.Tq * d.Tk * d.D > kAttentionParallelFlops;
}

// Where the heads sit in their buffers. Position i of batch b starts (b * T + i) * stride
// elements after its operand's base, and head h is D elements after head h - 1. Q, K and V (and
// their gradients, which share the layout) are three arrays ([B, Tq, H, D] and [B, Tk, KV, D])
// or three slices of one packed [B, T, H + 2 KV, D] buffer.
// Head `head` of batch entry b: its [T, D] rows start here.
template <class P>
P* head_at(P* base, int64_t stride, int64_t T_, int64_t b, int64_t head, int64_t D) {
  return base + b * T_ * stride + head * D;
}

template <class T>
struct AttentionOperands {
  T* q;
  T* k;
  T* v;
  int64_t q_stride, kv_stride;

  // The [Tq, D] rows of query head h, and the [Tk, D] rows of K/V head g, of batch entry b.
  T* q_head(const AttentionDims& d, int64_t b, int64_t h) const {
    return head_at(q, q_stride, d.Tq, b, h, d.D);
  }
  T* k_head(const AttentionDims& d, int64_t b, int64_t g) const {
    return head_at(k, kv_stride, d.Tk, b, g, d.D);
  }
  T* v_head(const AttentionDims& d, int64_t b, int64_t g) const {
    return head_at(v, kv_stride, d.Tk, b, g, d.D);
  }
};

template <class T>
AttentionOperands<T> separate_operands(T* q, T* k, T* v, const AttentionDims& d) {
  return {q, k, v, d.H * d.D, d.KV * d.D};
}

template <class T>
AttentionOperands<T> packed_operands(T* qkv, const AttentionDims& d) {
  const int64_t stride = (d.H + 2 * d.KV) * d.D;
  return {qkv, qkv + d.H * d.D, qkv + (d.H + d.KV) * d.D, stride, stride};
}

}  // namespace gradlab::kernels
