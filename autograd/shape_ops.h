// Ops that reorganise elements without computing on them: reshape, transpose, permute,
// concat and narrow. reshape shares storage (no copy); the others produce contiguous copies,
// so every tensor stays row-major and contiguous.
#pragma once

#include <vector>

#include "autograd/tensor.h"

namespace gradlab {

// Same elements, new shape; one axis may be -1 and is inferred. Shares x's storage.
Tensor reshape(const Tensor& x, const Shape& shape);
// Swaps two axes (negative axes count from the end).
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
// Reorders axes: result axis i is x's axis dims[i]; dims must be a permutation.
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
// Joins tensors along axis; all other axes must agree.
Tensor concat(const std::vector<Tensor>& tensors, int64_t axis);
// Elements [start, start + length) along axis.
Tensor narrow(const Tensor& x, int64_t axis, int64_t start, int64_t length);

}  // namespace gradlab
