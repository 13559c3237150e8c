// The pieces both fused-attention kernels share (attention.cpp, one GEMM per head;
// attention_lanes.cpp, one SIMD lane per head): the problem's sizes, where the heads sit in
// their buffers, and the masks. Internal to autograd/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "autograd/attention.h"

namespace gradlab::attention {

struct Dims {
  int64_t B, Tq, Tk, H, KV, D;
  int64_t group() const { return H / KV; }
};

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

  bool causal() const { return spec_.causal; }
  // Whether key padding or attn_mask is given, and whether they hide key j from query i of
  // (b, h) (the causal rule aside).
  bool has_explicit() const { return spec_.key_padding || spec_.attn_mask; }
  bool hides_explicitly(int64_t b, int64_t h, int64_t i, int64_t j) const {
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

// The heads go to the OpenMP threads above this many multiply-adds of one of the two products
// over all heads. At the copy model's size (1.6 M) a thread per half of the heads still paid
// off; 4 M (no threads there) made the step 2-6% slower.
constexpr int64_t kParallelFlops = 1 << 16;

inline bool worth_threads(const Dims& d) {
  return d.B * d.H * d.Tq * d.Tk * d.D > kParallelFlops;
}

// Where the heads sit in their buffers. Position i of batch b starts (b * T + i) * stride
// elements after its operand's base, and head h is D elements after head h - 1. Q, K and V (and
// their gradients, which share the layout) are three tensors ([B, T, H, D] and [B, T, KV, D]) or
// three slices of one packed [B, T, H + 2 KV, D] buffer.
template <class T>
struct Operands {
  T* q;
  T* k;
  T* v;
  int64_t q_stride, kv_stride;
};

template <class T>
Operands<T> separate(T* q, T* k, T* v, const Dims& d) {
  return {q, k, v, d.H * d.D, d.KV * d.D};
}

template <class T>
Operands<T> packed(T* qkv, const Dims& d) {
  const int64_t stride = (d.H + 2 * d.KV) * d.D;
  return {qkv, qkv + d.H * d.D, qkv + (d.H + d.KV) * d.D, stride, stride};
}

// Head `head` of batch entry b: its [T, D] rows start here.
template <class P>
P* head_at(P* base, int64_t stride, int64_t T_, int64_t b, int64_t head, int64_t D) {
  return base + b * T_ * stride + head * D;
}

}  // namespace gradlab::attention
