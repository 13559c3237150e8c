// Fused scaled dot-product attention with one GEMM per (batch, head), on strided views of the
// operands (no transposed copies), with scaling, masking and softmax fused between the two
// products: weights = softmax(Q K^T * scale + mask) along Tk, out = weights @ V, query head h
// reading K/V head h / (H / KV), a fully masked row giving zero weights. For long sequences and
// wide heads; attention_lanes.h takes the short, narrow ones.
#pragma once

#include "autograd/kernels/attention_parts.h"

namespace gradlab::kernels {

// out [B, Tq, H, D] and weights [B, H, Tq, Tk] from the operands in `in` (their layout in
// attention_parts.h).
template <class T>
void attention_forward(const AttentionOperands<const T>& in, const AttentionDims& d,
                       const AttentionMask& mask, T scale, T* out, T* weights);

// The gradients of Q, K and V into `grad` (laid out as `in`), from g = dL/dout [B, Tq, H, D],
// the inputs and the forward's weights [B, H, Tq, Tk]. Of the masks only the causal rule
// matters here (the weights hold the rest): it lets the products skip the hidden keys.
template <class T>
void attention_backward(const T* g, const AttentionOperands<const T>& in, const T* weights,
                        const AttentionDims& d, bool causal, T scale,
                        const AttentionOperands<T>& grad);

}  // namespace gradlab::kernels
