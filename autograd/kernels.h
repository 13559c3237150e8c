// Loops shared by the op families: element-wise maps over contiguous buffers and the strided
// walk that implements NumPy broadcasting. Internal to autograd/.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "autograd/shape.h"

namespace gradlab::kernels {

// Below this many elements an OpenMP fork (and waking a second thread that may be busy
// elsewhere) costs more than a memory-bound loop gains from it.
constexpr int64_t kParallelThreshold = 1 << 18;
// The same for loops of small matrix products, counted in multiply-adds.
constexpr int64_t kParallelFlops = 1 << 22;
// Matrix products below this many multiply-adds (about 0.1 ms on one core) run on one
// thread: splitting them costs more in synchronisation than it saves.
constexpr int64_t kParallelGemmFlops = 1 << 24;

// out[i] = f(a[i]) over n contiguous elements.
template <class T, class F>
void map(const T* a, T* out, int64_t n, F f) {
#pragma omp parallel for simd if (n > kParallelThreshold) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = f(a[i]);
}

// out[i] = f(a[i], b[i]) over n contiguous elements.
template <class T, class F>
void zip(const T* a, const T* b, T* out, int64_t n, F f) {
#pragma omp parallel for simd if (n > kParallelThreshold) schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
}

// y[i] = exp(x[i] - shift) over n contiguous elements (x == y allowed); returns the sum of the
// y[i]. Eigen's vectorised exp: calling libm's scalar expf per score was a tenth of an
// attention step. Eigen clamps its argument, so exp(-inf) would come out as a tiny denormal
// instead of the exact 0 a masked entry needs: arguments below log(denorm_min) give 0. The
// tail runs as one padded fixed-size block, since Eigen would finish a dynamic-size array with
// scalar calls, and attention rows are short (often 20 to 64).
template <class T>
T exp_shifted(const T* x, T* y, int64_t n, T shift) {
  static const T underflow = std::log(std::numeric_limits<T>::denorm_min());
  auto exp_of = [&](const auto& v) {
    const auto shifted = v - shift;
    return (shifted < underflow).select(T(0), shifted.exp());
  };
  using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
  using Block = Eigen::Array<T, 16, 1>;  // a whole number of SIMD vectors
  const int64_t body = n - n % Block::SizeAtCompileTime;
  Eigen::Map<Array> out(y, body);
  out = exp_of(Eigen::Map<const Array>(x, body));
  T total = out.sum();
  if (body < n) {
    Block tail = Block::Constant(-std::numeric_limits<T>::infinity());
    std::copy(x + body, x + n, tail.data());
    tail = exp_of(tail);
    std::copy(tail.data(), tail.data() + (n - body), y + body);
    total += tail.sum();
  }
  return total;
}

// out = f(a, b) where a and b broadcast to out_shape. The last axis is the inner loop; the
// others are walked with an odometer, so the common cases ([B,T,C] + [C], a scalar, equal
// shapes) run as tight loops.
template <class T, class F>
void broadcast_zip(const T* a, const Shape& a_shape, const T* b, const Shape& b_shape, T* out,
                   const Shape& out_shape, F f) {
  const int64_t n = numel(out_shape);
  if (n == 0) return;
  if (a_shape == b_shape) return zip(a, b, out, n, f);
  if (numel(b_shape) == 1 && numel(a_shape) == n) {
    const T bv = b[0];
    return map(a, out, n, [&](T x) { return f(x, bv); });
  }
  if (numel(a_shape) == 1 && numel(b_shape) == n) {
    const T av = a[0];
    return map(b, out, n, [&](T y) { return f(av, y); });
  }
  const Shape sa = broadcast_strides(a_shape, out_shape);
  const Shape sb = broadcast_strides(b_shape, out_shape);
  const size_t rank = out_shape.size();
  const int64_t inner = out_shape[rank - 1];
  const int64_t ia = sa[rank - 1], ib = sb[rank - 1];
  const int64_t rows = n / inner;
#pragma omp parallel for if (n > kParallelThreshold) schedule(static)
  for (int64_t row = 0; row < rows; ++row) {
    int64_t oa = 0, ob = 0, rest = row;
    for (size_t axis = rank - 1; axis-- > 0;) {
      const int64_t i = rest % out_shape[axis];
      rest /= out_shape[axis];
      oa += i * sa[axis];
      ob += i * sb[axis];
    }
    T* o = out + row * inner;
    for (int64_t j = 0; j < inner; ++j) o[j] = f(a[oa + j * ia], b[ob + j * ib]);
  }
}

}  // namespace gradlab::kernels
