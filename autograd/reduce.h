// Reductions: sum and mean over all or some axes, max and argmax along one axis, and sum_to,
// which reduces a broadcast gradient back to its input's shape (used by the engine), and its
// dual broadcast_to.
#pragma once

#include <vector>

#include "autograd/indices.h"
#include "autograd/tensor.h"

namespace gradlab {

// Sum of all elements, shape [].
Tensor sum(const Tensor& x);
// Sum over the given axes (negative allowed); keepdim leaves them with size 1.
Tensor sum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim = false);

// Maximum along axis; the gradient flows to the first position holding the maximum.
Tensor max(const Tensor& x, int64_t axis, bool keepdim = false);
// Position of the first maximum along axis (not differentiable).
Indices argmax(const Tensor& x, int64_t axis, bool keepdim = false);

// Expands x to `shape` by NumPy broadcasting (a copy); its gradient is sum_to.
Tensor broadcast_to(const Tensor& x, const Shape& shape);
// Sums x over the axes that broadcasting expanded, giving a tensor of `shape`. Throws
// ShapeError if `shape` does not broadcast to x's shape.
Tensor sum_to(const Tensor& x, const Shape& shape);

}  // namespace gradlab
