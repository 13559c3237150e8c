// A pre-LayerNorm transformer's feed-forward sublayer with its residual connection as one op:
//
//   feed_forward_residual(x, w) = x + linear(gelu(linear(layer_norm(x), fc1)), fc2)
//
// The composed ops are the reference: this op gives their values and gradients bit for bit
// (tests/test_feed_forward.cpp) and runs a block of rows through the whole sublayer while it
// is cached (kernels/feed_forward.h). nn::TransformerBlock uses it where it applies: pre-LN
// blocks with no dropout active.
#pragma once

#include "autograd/tensor.h"

namespace gradlab {

// The parameters; the optional ones are left out of a designated initializer when absent.
struct FeedForwardWeights {
  Tensor norm_weight{};  // [C], or undefined (ones)
  Tensor norm_bias{};    // [C], or undefined (zeros)
  double eps = 1e-5;
  Tensor fc1_weight{};  // [F, C]
  Tensor fc1_bias{};    // [F], or undefined
  Tensor fc2_weight{};  // [C, F]
  Tensor fc2_bias{};    // [C], or undefined
};

// x [..., C] -> [..., C].
Tensor feed_forward_residual(const Tensor& x, const FeedForwardWeights& w);

}  // namespace gradlab
