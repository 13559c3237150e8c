// Fused scaled dot-product attention with its own backward: scores, masking, softmax and the
// weighted sum of values in one op, per (batch, head), reading Q, K and V in the layout the
// projections produce ([B, T, H, D]) so that no transposed copy is made.
//
// It computes exactly what nn::MultiHeadAttention's composed path computes (and is checked
// against it): weights = softmax(Q K^T * scale + mask) along Tk, out = weights @ V, with query
// head h reading K/V head h / (H / KV), and a fully masked row giving zero weights.
#pragma once

#include <optional>

#include "autograd/indices.h"
#include "autograd/tensor.h"

namespace gradlab {

struct AttentionMaskSpec {
  bool causal = false;                // query i sees keys j <= i
  const Mask* key_padding = nullptr;  // [B, Tk], true = padding
  const Mask* attn_mask = nullptr;    // broadcastable to [B, H, Tq, Tk], true = masked
};

struct FusedAttention {
  Tensor output;   // [B, Tq, H, D]
  Tensor weights;  // [B, H, Tq, Tk] (not differentiable; for inspection), undefined if not wanted
};

// q [B, Tq, H, D], k and v [B, Tk, KV, D] with KV dividing H. Without need_weights the weights
// are not returned (and, on short sequences, never written out).
FusedAttention fused_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                               const AttentionMaskSpec& mask, double scale,
                               bool need_weights = true);

// Self-attention on one packed buffer: qkv [B, T, H + 2 KV, D] holds, for each position, the H
// query heads, then the KV key heads, then the KV value heads (what one projection by the three
// weights stacked produces). Computes what fused_attention computes on those three slices, and
// its gradient comes back in the same packed layout, so that the projection's backward is one
// GEMM.
FusedAttention fused_attention_packed(const Tensor& qkv, int64_t num_heads, int64_t num_kv_heads,
                                      const AttentionMaskSpec& mask, double scale,
                                      bool need_weights = true);

}  // namespace gradlab
