// Integer and boolean arrays that travel beside tensors: token ids and class targets
// (Indices), and masks (Mask, true = selected). They carry no gradient.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/error.h"
#include "autograd/shape.h"

namespace gradlab {

template <class T>
struct Array {
  Shape shape;
  std::vector<T> values;

  Array() = default;
  // Throws ShapeError if the value count does not fill the shape.
  Array(Shape shape_, std::vector<T> values_)
      : shape(std::move(shape_)), values(std::move(values_)) {
    if (static_cast<int64_t>(values.size()) != gradlab::numel(shape)) {
      throw ShapeError("array: " + std::to_string(values.size()) + " values do not fill shape " +
                       to_string(shape));
    }
  }
  int64_t numel() const { return static_cast<int64_t>(values.size()); }
  bool operator==(const Array&) const = default;
};

using Indices = Array<int64_t>;
using Mask = Array<uint8_t>;

}  // namespace gradlab
