// Shapes and the index arithmetic shared by every op: strides, broadcasting, axis
// normalisation. Shapes are row-major (C order), like PyTorch and HDF5.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace gradlab {

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& shape);
// "[2,3,4]"; a rank-0 shape prints as "[]".
std::string to_string(const Shape& shape);
// Row-major strides in elements.
Shape contiguous_strides(const Shape& shape);

// Maps axis in [-rank, rank) to [0, rank); throws AxisError naming op otherwise.
int64_t normalize_axis(const char* op, int64_t axis, int64_t rank);

// NumPy broadcasting of two shapes; throws ShapeError naming op and both shapes.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);

// Strides for reading a tensor of shape `in` as if it had the (broadcast) shape `out`:
// broadcast axes get stride 0. `in` must be broadcastable to `out`.
Shape broadcast_strides(const Shape& in, const Shape& out);

}  // namespace gradlab
