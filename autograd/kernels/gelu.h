// GELU, y = x Phi(x) with Phi the standard normal distribution function, forward and backward
// over n contiguous elements (any shape, flattened: [n]). Both run on Eigen arrays: their erf
// and exp are vectorised for float (a rational erf accurate to a few ulp), and fall back to
// std::erf for double, which gradient checks need.
#pragma once

#include <cstdint>

namespace gradlab::kernels {

template <class T>
void gelu_forward(const T* x, T* y, int64_t n);

// dx = g * (Phi(x) + x phi(x)), phi the normal density, from the input x, the forward's output y
// and g = dL/dy: Phi(x) is read back from y, so the backward keeps nothing of its own.
template <class T>
void gelu_backward(const T* x, const T* y, const T* g, T* dx, int64_t n);

}  // namespace gradlab::kernels
