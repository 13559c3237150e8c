// Fused attention with one SIMD lane per (batch, head), for short sequences of narrow heads
// (the toy models' 20 positions of 16 dimensions), where a GEMM per head leaves most of its
// vectors empty and spends more on calls and packing than on arithmetic. Internal to autograd/.
//
// A lane group is up to kLanes query heads, whole groups of heads sharing a K/V head. Their Q,
// K, V rows are copied into arrays of vectors that hold element (t, d) of every head of the
// group in one vector (register transposes of kLanes x kLanes blocks), and the textbook loops
// run on those vectors: each lane does its own head's arithmetic, the softmax needs no sum
// across a vector, and the causal rule skips the products it would only zero. Results go back
// through the same transposes. Same results as the per-head kernel up to rounding (the sums
// run in the same order except the softmax's); tests/test_fused_attention.cpp compares each
// kernel with the composed ops, on shapes that reach it.
#pragma once

#include "autograd/attention_parts.h"

namespace gradlab::attention {

// Whether the lane kernel takes this problem of element type T; the per-head GEMM kernel in
// attention.cpp takes the rest.
template <class T>
bool lanes_fit(const Dims& d);

// Elements of the arrays lanes_forward keeps for lanes_backward (Q, K, V and the weights, in
// lanes: the backward then transposes only dO and the gradients).
template <class T>
int64_t lanes_saved_size(const Dims& d);

// The per-head kernel's forward (attention.cpp), plus: weights may be null (not wanted), and
// `saved` (lanes_saved_size elements, vector-aligned) receives what the backward needs.
template <class T>
void lanes_forward(const Operands<const T>& in, const Dims& d, const MaskView& mask, T scale,
                   T* out, T* weights, T* saved);

// Gradients from g, the output's gradient [B, Tq, H, D], into `grad` (laid out as the inputs
// were). Of the masks only the causal rule matters here: the saved weights hold the rest.
template <class T>
void lanes_backward(const T* g, const T* saved, const Dims& d, bool causal, T scale,
                    const Operands<T>& grad);

}  // namespace gradlab::attention
