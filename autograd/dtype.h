// The two element types gradlab computes in, and the helper that turns a runtime dtype into a
// compile-time type. float32 trains; float64 makes central-difference gradient checks exact
// enough. One runtime dtype (rather than Tensor<T>) keeps modules and models free of templates:
// `module.to(DType::Float64)` is all a gradient check of a whole model needs.
#pragma once

#include <cstdint>
#include <string>

#include "autograd/error.h"

namespace gradlab {

enum class DType : uint8_t { Float32, Float64 };

inline const char* dtype_name(DType dtype) {
  return dtype == DType::Float32 ? "float32" : "float64";
}
inline size_t dtype_size(DType dtype) {
  return dtype == DType::Float32 ? 4 : 8;
}

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::Float32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::Float64;
}

// Calls f.template operator()<T>() with T = float or double:
//   dispatch(x.dtype(), [&]<class T>() { ... x.data<T>() ... });
template <class F>
decltype(auto) dispatch(DType dtype, F&& f) {
  if (dtype == DType::Float32) return f.template operator()<float>();
  return f.template operator()<double>();
}

// Throws DTypeError unless a and b agree: ops never convert silently.
inline void check_same_dtype(const char* op, DType a, DType b) {
  if (a != b) {
    throw DTypeError(std::string(op) + ": dtype mismatch: " + dtype_name(a) + " and " +
                     dtype_name(b));
  }
}

}  // namespace gradlab
