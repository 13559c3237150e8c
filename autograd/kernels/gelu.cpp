#include "autograd/kernels/gelu.h"

#include <cmath>
#include <numbers>

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>

#include "autograd/kernels/elementwise.h"
#include "autograd/kernels/kernel_list.h"
#include "autograd/kernels/simd.h"

namespace gradlab::kernels {

template <class T>
void gelu_forward(const T* x, T* y, int64_t n) {
  using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
  for_chunks(n, [&](int64_t begin, int64_t end) {
    const Eigen::Map<const Array> v(x + begin, end - begin);
    Eigen::Map<Array>(y + begin, end - begin) =
        v * (T(0.5) * (T(1) + (v * T(std::numbers::sqrt2 / 2)).erf()));
  });
}

// Phi(x) comes back from the output as y / x (Phi(0) = 1/2), the forward's own value to a
// rounding or two: computing it again through erf would be half of the backward's arithmetic.
// The output is kept anyway, as the next layer's input.
template <class T>
void gelu_backward(const T* x, const T* y, const T* g, T* dx, int64_t n) {
  const T inv_sqrt_2pi = T(0.5 * std::numbers::inv_sqrtpi * std::numbers::sqrt2);
  // At n elements from i, in vectors; density: exp(-x^2 / 2) there.
  auto grad_at = [&](int64_t i, const T* density) {
    using simd::Vec;
    const Vec<T> v = simd::load<T>(x + i);
    const Vec<T> cdf = v == 0 ? Vec<T>{} + T(0.5) : simd::load<T>(y + i) / v;
    simd::store<T>(dx + i,
                   simd::load<T>(g + i) * (cdf + v * inv_sqrt_2pi * simd::load<T>(density)));
  };
  for_chunks(n, [&](int64_t begin, int64_t end) {
    using Block = Eigen::Array<T, 16, 1>;  // Eigen's vectorised exp on whole vectors
    constexpr int64_t size = Block::SizeAtCompileTime, lanes = simd::kLanes<T>;
    int64_t i = begin;
    for (; i + size <= end; i += size) {
      const Block density = (T(-0.5) * Eigen::Map<const Block>(x + i).square()).exp();
      for (int64_t l = 0; l < size; l += lanes) grad_at(i + l, density.data() + l);
    }
    for (; i < end; ++i) {
      const T v = x[i];
      const T cdf = v == 0 ? T(0.5) : y[i] / v;
      dx[i] = g[i] * (cdf + v * inv_sqrt_2pi * std::exp(T(-0.5) * v * v));
    }
  });
}

GRADLAB_GELU_KERNELS(GRADLAB_INSTANTIATE_KERNEL)

}  // namespace gradlab::kernels
