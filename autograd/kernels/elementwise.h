// Loops shared by the op families: element-wise maps over contiguous buffers, the strided walk
// that implements NumPy broadcasting, and the size below which such a loop stays on one thread.
// Buffers are flat and row-major; n counts elements, shapes are the tensors' own.
#pragma once

#include <omp.h>

#include <cstdint>

#include "autograd/shape.h"

namespace gradlab::kernels {

// Below this many elements an OpenMP fork (and waking a second thread that may be busy
// elsewhere) costs more than a memory-bound loop gains from it. At 2^16 the copy model's
// activations (64 x 20 x 64 floats) split, which pays on two threads.
constexpr int64_t kParallelThreshold = 1 << 16;

// Whether a loop whose work is `large` goes to the OpenMP threads: only when this thread has
// more than one to give (a batch share's thread has one). A region entered only to run on one
// thread (`omp parallel if (false)`, or a nested one) still builds a team and makes a wake-up
// system call: 1.3 us, 2.5 us on each of two threads at once, dozens of times a training step.
inline bool worth_threads(bool large) {
  return large && omp_get_max_threads() > 1;
}

// body(i) for every i in [0, count): on the calling thread, or in equal contiguous chunks of i
// across the OpenMP threads when worth_threads(large).
template <class Body>
void for_each_index(int64_t count, bool large, Body body) {
  if (!worth_threads(large)) {
    for (int64_t i = 0; i < count; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) body(i);
}

// body(begin, end) over [0, n): on the calling thread, or in equal contiguous chunks across
// the OpenMP threads above kParallelThreshold. The element loops inside are plain loops that g++
// vectorises; written as one `omp parallel for simd`, it left them scalar.
template <class Body>
void for_chunks(int64_t n, Body body) {
  if (!worth_threads(n > kParallelThreshold)) return body(int64_t{0}, n);
#pragma omp parallel
  {
    const int64_t t = omp_get_thread_num(), count = omp_get_num_threads();
    body(n * t / count, n * (t + 1) / count);
  }
}

// out[i] = f(a[i]) over n contiguous elements.
template <class T, class F>
void map(const T* a, T* out, int64_t n, F f) {
  for_chunks(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = f(a[i]);
  });
}

// out[i] = f(a[i], b[i]) over n contiguous elements.
template <class T, class F>
void zip(const T* a, const T* b, T* out, int64_t n, F f) {
  for_chunks(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = f(a[i], b[i]);
  });
}

// out = f(a, b) where a and b broadcast to out_shape. The last axis is the inner loop; the
// others are walked with an odometer, so the common cases ([B,T,C] + [C], a scalar, equal
// shapes) run as tight loops.
template <class T, class F>
void broadcast_zip(const T* a, const Shape& a_shape, const T* b, const Shape& b_shape, T* out,
                   const Shape& out_shape, F f) {
  const int64_t n = numel(out_shape);
  if (n == 0) return;
  // Equal shapes smaller than out (broadcast_to's rank-0 or [1, 1] source) take the general path.
  if (a_shape == b_shape && numel(a_shape) == n) return zip(a, b, out, n, f);
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
  for_each_index(n / inner, n > kParallelThreshold, [&](int64_t row) {
    int64_t oa = 0, ob = 0, rest = row;
    for (size_t axis = rank - 1; axis-- > 0;) {
      const int64_t i = rest % out_shape[axis];
      rest /= out_shape[axis];
      oa += i * sa[axis];
      ob += i * sb[axis];
    }
    T* o = out + row * inner;
    for (int64_t j = 0; j < inner; ++j) o[j] = f(a[oa + j * ia], b[ob + j * ib]);
  });
}

}  // namespace gradlab::kernels
