// Element-wise comparisons: 0/1 tensors in the inputs' dtype, with NumPy broadcasting. They
// record no backward (a step function has no useful gradient): their results are constants,
// ready for where(condition, a, b) (index.h) or as a multiplicative mask.
#pragma once

#include "autograd/tensor.h"

namespace gradlab {

Tensor greater(const Tensor& a, const Tensor& b);
Tensor greater_equal(const Tensor& a, const Tensor& b);
Tensor less(const Tensor& a, const Tensor& b);
Tensor less_equal(const Tensor& a, const Tensor& b);
Tensor equal(const Tensor& a, const Tensor& b);
Tensor not_equal(const Tensor& a, const Tensor& b);

// The same against a number: greater(x, 0.5) is 1 where x > 0.5.
Tensor greater(const Tensor& a, double b);
Tensor greater_equal(const Tensor& a, double b);
Tensor less(const Tensor& a, double b);
Tensor less_equal(const Tensor& a, double b);
Tensor equal(const Tensor& a, double b);
Tensor not_equal(const Tensor& a, double b);

}  // namespace gradlab
