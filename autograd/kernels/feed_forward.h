// A pre-LayerNorm transformer's whole feed-forward sublayer as one kernel, forward and backward:
//
//   y = x + fc2(gelu(fc1(layer_norm(x))))       x, y [N, C]; hidden width F
//
// Why fused: one op at a time, each op reads its input from wherever the previous op left it,
// and the sublayer's activations ([N, F], 1.5 MiB for the character model) do not fit the
// second-level cache. Here each block of rows goes through the whole sublayer while it is
// cached. Every row's arithmetic is the composed ops' (the same kernels on fewer rows, sums in
// the same order), so the results are bit for bit those of layer_norm, linear, gelu, linear and
// add one after the other, whatever the thread count; tests/test_feed_forward.cpp holds it to
// that. Internal to autograd/; the op is autograd/feed_forward.h.
#pragma once

#include <cstdint>

namespace gradlab::kernels {

// The sublayer's sizes and parameters. Weights are PyTorch's Linear layout [out, in]; a null
// norm_weight means ones, a null bias zeros.
template <class T>
struct FeedForwardParams {
  int64_t rows, channels, hidden;  // N, C, F
  const T* norm_weight;            // [C]
  const T* norm_bias;              // [C]
  T eps;
  const T* fc1_weight;  // [F, C]
  const T* fc1_bias;    // [F]
  const T* fc2_weight;  // [C, F]
  const T* fc2_bias;    // [C]
};

// What the forward keeps for the backward: each row's mean and 1/std, the normalised input, and
// the hidden layer before and after GELU.
template <class T>
struct FeedForwardSaved {
  T* mean;       // [N]
  T* rstd;       // [N]
  T* normed;     // [N, C]
  T* pre_gelu;   // [N, F]
  T* post_gelu;  // [N, F]
};

template <class T>
void feed_forward_forward(const FeedForwardParams<T>& p, const T* x, T* y,
                          const FeedForwardSaved<T>& saved);

// The gradients, from dy = dL/dy; a null pointer skips that parameter's gradient. dx includes
// the residual's dy.
template <class T>
struct FeedForwardGrads {
  T* dx;           // [N, C]
  T* norm_weight;  // [C]
  T* norm_bias;    // [C]
  T* fc1_weight;   // [F, C]
  T* fc1_bias;     // [F]
  T* fc2_weight;   // [C, F]
  T* fc2_bias;     // [C]
};

template <class T>
void feed_forward_backward(const FeedForwardParams<T>& p, const T* x,
                           const FeedForwardSaved<T>& saved, const T* dy,
                           const FeedForwardGrads<T>& grads);

}  // namespace gradlab::kernels
