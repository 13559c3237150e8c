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
// run in the same order except the softmax's); the tests compare the two.
#pragma once

#include "autograd/attention_parts.h"

namespace gradlab::attention {

// Whether the lane kernel takes this problem of element type T; the per-head GEMM kernel in
// attention.cpp takes the rest.
template <class T>
bool lanes_fit(const Dims& d);

// The same contracts as the per-head kernel's forward and backward (attention.cpp); the backward
// needs to know only whether the causal rule applied (the weights hold every other mask).
template <class T>
void lanes_forward(const Operands<const T>& in, const Dims& d, const MaskView& mask, T scale,
                   T* out, T* weights);

template <class T>
void lanes_backward(const T* g, const Operands<const T>& in, const T* weights, const Dims& d,
                    bool causal, T scale, const Operands<T>& grad);

}  // namespace gradlab::attention
