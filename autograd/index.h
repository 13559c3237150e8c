// Ops driven by integer ids and boolean masks: embedding lookup, masked_fill and where.
#pragma once

#include "autograd/indices.h"
#include "autograd/tensor.h"

namespace gradlab {

// weight [V, C], ids [...] in [0, V) -> [..., C]. The gradient scatter-adds into the rows used.
Tensor embedding(const Tensor& weight, const Indices& ids);
// x with `value` where mask is true; mask broadcasts to x's shape.
Tensor masked_fill(const Tensor& x, const Mask& mask, double value);
// a where mask is true, else b; mask, a and b broadcast together.
Tensor where(const Mask& mask, const Tensor& a, const Tensor& b);
// a where condition is nonzero, else b: the same op with the mask read from a tensor (a
// comparison's 0/1 result, compare.h); condition gets no gradient.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);

}  // namespace gradlab
