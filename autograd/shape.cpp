// Shape arithmetic: element counts, strides, broadcasting and axis checks.
#include "autograd/shape.h"

#include <sstream>

#include "autograd/error.h"

namespace gradlab {

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string to_string(const Shape& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? "," : "") << shape[i];
  out << ']';
  return out.str();
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

int64_t normalize_axis(const char* op, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank || rank == 0) {
    throw AxisError(std::string(op) + ": axis " + std::to_string(axis) +
                    " is out of range for a tensor of rank " + std::to_string(rank));
  }
  return axis < 0 ? axis + rank : axis;
}

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      throw ShapeError(std::string(op) + ": shapes cannot be broadcast together: " + to_string(a) +
                       " and " + to_string(b));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_strides(const Shape& in, const Shape& out) {
  Shape strides(out.size(), 0);
  const Shape own = contiguous_strides(in);
  const size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) strides[lead + i] = in[i] == 1 ? 0 : own[i];
  return strides;
}

}  // namespace gradlab
