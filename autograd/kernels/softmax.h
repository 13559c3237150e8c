// Softmax, log-softmax and cross-entropy over rows, forward and backward, and the one softmax
// backward row that softmax and both fused attention kernels run. A tensor is viewed as
// [outer, n, inner] around the softmax axis: each (outer, inner) pair is one row of n elements
// spaced inner apart (inner = 1 for the last axis, the common case).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "autograd/kernels/rows.h"
#include "autograd/shape.h"

namespace gradlab::kernels {

struct SoftmaxRows {
  int64_t outer = 1, n = 1, inner = 1;
  // shape viewed around `axis` (already in [0, rank)).
  SoftmaxRows(const Shape& shape, int64_t axis) : n(shape[axis]) {
    for (int64_t i = 0; i < axis; ++i) outer *= shape[i];
    for (size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
  }
  int64_t count() const { return outer * inner; }
  int64_t start(int64_t row) const { return (row / inner) * n * inner + row % inner; }
};

// y = softmax(x) along each row; a row that is -inf everywhere gives zeros. x, y [outer, n, inner].
template <class T>
void softmax_rows_forward(const T* x, T* y, const SoftmaxRows& rows);

// dx = y * (g - sum(g * y)) along each row, from y (the forward's output) and g = dL/dy.
template <class T>
void softmax_rows_backward(const T* y, const T* g, T* dx, const SoftmaxRows& rows);

// y = x - max - log(sum(exp(x - max))) along each row; -inf for a row that is -inf everywhere.
template <class T>
void log_softmax_rows_forward(const T* x, T* y, const SoftmaxRows& rows);

// dx = g - exp(y) * sum(g) along each row (zero on rows that are -inf everywhere).
template <class T>
void log_softmax_rows_backward(const T* y, const T* g, T* dx, const SoftmaxRows& rows);

// log_probs [N, C] = log_softmax(logits [N, C]); returns the sum of -log_probs[i, targets[i]]
// over the rows whose target is not ignore_index. targets [N] lie in [0, C) or are ignore_index.
template <class T>
double cross_entropy_forward(const T* logits, const int64_t* targets, int64_t rows, int64_t classes,
                             int64_t ignore_index, T* log_probs);

// dx [N, C] = factor * (softmax - onehot(targets[i])) on rows whose target counts, 0 on the
// others, from the forward's log_probs [N, C].
template <class T>
void cross_entropy_backward(const T* log_probs, const int64_t* targets, int64_t rows,
                            int64_t classes, int64_t ignore_index, T factor, T* dx);

// dx = scale * y * (g - sum(g * y)) along one row of n elements spaced `stride` apart: the
// gradient of y = softmax(scale * x) given g = dL/dy. g and dx may be the same row. Elements E
// are scalars, or SIMD vectors with one row per lane (the lane attention kernel): there the
// lanes already add in parallel and the sum over the row is a plain loop, while scalar rows add
// in sum_over's partial sums.
template <class E, class T>
void softmax_backward_row(const E* y, const E* g, E* dx, int64_t n, int64_t stride, T scale) {
  E dot{};
  if constexpr (std::is_arithmetic_v<E>) {
    dot = sum_over<E>(n, [&](int64_t i) { return g[i * stride] * y[i * stride]; });
  } else {
    for (int64_t i = 0; i < n; ++i) dot += g[i * stride] * y[i * stride];
  }
  for (int64_t i = 0; i < n; ++i) dx[i * stride] = scale * y[i * stride] * (g[i * stride] - dot);
}

// The same in place over `rows` contiguous rows of n elements (g becomes dx), on the first
// `count` of each: all the rows' sums first, then their dx. Row by row, each short row (16-64
// attention weights) waited on its own sum before its dx could start.
template <class T>
void softmax_backward_rows(const T* y, T* g, int64_t rows, int64_t count, int64_t n, T scale) {
  constexpr int64_t group = 8;
  for (int64_t g0 = 0; g0 < rows; g0 += group) {
    const int64_t size = std::min(group, rows - g0);
    T dot[group];
    for (int64_t r = 0; r < size; ++r) {
      const T* y_row = y + (g0 + r) * n;
      const T* g_row = g + (g0 + r) * n;
      dot[r] = sum_over<T>(count, [&](int64_t i) { return g_row[i] * y_row[i]; });
    }
    for (int64_t r = 0; r < size; ++r) {
      const T* y_row = y + (g0 + r) * n;
      T* g_row = g + (g0 + r) * n;
#pragma omp simd
      for (int64_t i = 0; i < count; ++i) g_row[i] = scale * y_row[i] * (g_row[i] - dot[r]);
    }
  }
}

}  // namespace gradlab::kernels
