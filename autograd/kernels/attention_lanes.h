// Fused attention with one SIMD lane per (batch, head), for short sequences of narrow heads
// (the toy models' 20 positions of 16 dimensions), where a GEMM per head (attention.h) leaves
// most of its vectors empty and spends more on calls and packing than on arithmetic. Shapes and
// layouts as in attention.h; the op (autograd/attention.cpp) picks the kernel.
//
// A lane group is up to kLanes query heads, whole groups of heads sharing a K/V head. Their Q,
// K, V rows are copied into arrays of vectors that hold element (t, d) of every head of the
// group in one vector (register transposes of kLanes x kLanes blocks), and the textbook loops
// run on those vectors: each lane does its own head's arithmetic, the softmax needs no sum
// across a vector, and the causal rule skips the products it would only zero. Results go back
// through the same transposes. Same results as the per-head kernel up to rounding (the sums
// run in the same order except the softmax's); tests/autograd/test_fused_attention.cpp compares
// each kernel with the composed ops, on shapes that reach it.
#pragma once

#include "autograd/kernels/attention_parts.h"

namespace gradlab::kernels {

// Whether the lane kernel takes this problem of element type T; the per-head GEMM kernel
// (attention.h) takes the rest.
template <class T>
bool attention_lanes_fit(const AttentionDims& d);

// Elements of the arrays attention_lanes_forward keeps for attention_lanes_backward (Q, K, V and
// the weights, in lanes: the backward then transposes only dO and the gradients).
template <class T>
int64_t attention_lanes_saved_size(const AttentionDims& d);

// attention_forward (attention.h), plus: weights [B, H, Tq, Tk] may be null (not wanted), and
// `saved` (attention_lanes_saved_size elements, vector-aligned) receives what the backward needs.
template <class T>
void attention_lanes_forward(const AttentionOperands<const T>& in, const AttentionDims& d,
                             const AttentionMask& mask, T scale, T* out, T* weights, T* saved);

// Gradients from g, the output's gradient [B, Tq, H, D], into `grad` (laid out as the inputs
// were). Of the masks only the causal rule matters here: the saved weights hold the rest.
template <class T>
void attention_lanes_backward(const T* g, const T* saved, const AttentionDims& d, bool causal,
                              T scale, const AttentionOperands<T>& grad);

}  // namespace gradlab::kernels
