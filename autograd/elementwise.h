// Element-wise ops. Binary ops broadcast like NumPy; their gradients are reduced back to each
// input's shape by the engine. Scalar forms take a plain number on either side.
#pragma once

#include "autograd/tensor.h"

namespace gradlab {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);

Tensor add(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
// b - a and b / a with the scalar on the left.
Tensor rsub(const Tensor& a, double b);
Tensor rdiv(const Tensor& a, double b);

Tensor neg(const Tensor& x);
// x^exponent for a scalar exponent; for non-integer exponents x must be positive.
Tensor pow(const Tensor& x, double exponent);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor relu(const Tensor& x);
// The exact GELU, x * Phi(x) with the normal CDF (PyTorch's default, not the tanh form).
Tensor gelu(const Tensor& x);

inline Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
inline Tensor operator-(const Tensor& a, const Tensor& b) {
  return sub(a, b);
}
inline Tensor operator*(const Tensor& a, const Tensor& b) {
  return mul(a, b);
}
inline Tensor operator/(const Tensor& a, const Tensor& b) {
  return div(a, b);
}
inline Tensor operator-(const Tensor& x) {
  return neg(x);
}
inline Tensor operator+(const Tensor& a, double b) {
  return add(a, b);
}
inline Tensor operator+(double a, const Tensor& b) {
  return add(b, a);
}
inline Tensor operator-(const Tensor& a, double b) {
  return add(a, -b);
}
inline Tensor operator-(double a, const Tensor& b) {
  return rsub(b, a);
}
inline Tensor operator*(const Tensor& a, double b) {
  return mul(a, b);
}
inline Tensor operator*(double a, const Tensor& b) {
  return mul(b, a);
}
inline Tensor operator/(const Tensor& a, double b) {
  return mul(a, 1.0 / b);
}
inline Tensor operator/(double a, const Tensor& b) {
  return rdiv(b, a);
}

}  // namespace gradlab
