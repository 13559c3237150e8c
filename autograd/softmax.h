// Softmax, log-softmax and cross-entropy. All subtract the row maximum first, so logits of
// 1e4 are fine, and a row of -inf except one entry gives a one-hot result. A row that is -inf
// everywhere (every key masked) gives softmax 0 everywhere and a zero gradient, never NaN.
#pragma once

#include "autograd/indices.h"
#include "autograd/tensor.h"

namespace gradlab {

Tensor softmax(const Tensor& x, int64_t axis);
Tensor log_softmax(const Tensor& x, int64_t axis);

// Mean negative log-likelihood of targets under softmax(logits) along the last axis.
// logits [..., V], targets [...] with values in [0, V) or ignore_index; ignored positions are
// left out of the mean. With no counted target the loss is 0 (and so is its gradient).
Tensor cross_entropy(const Tensor& logits, const Indices& targets, int64_t ignore_index = -100);

}  // namespace gradlab
