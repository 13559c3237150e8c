#include "autograd/kernels/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/kernels/elementwise.h"
#include "autograd/kernels/kernel_list.h"

namespace gradlab::kernels {
namespace {

// Runs f(in_row, out_row) for every row (rows.inner apart inside), in parallel when the work is
// large.
template <class T, class F>
void for_each_row(const SoftmaxRows& rows, const T* in, T* out, F f) {
  for_each_index(rows.count(), rows.count() * rows.n > kParallelThreshold, [&](int64_t r) {
    const int64_t s = rows.start(r);
    f(in + s, out + s);
  });
}

template <class T>
T row_max(const T* x, int64_t n, int64_t stride) {
  if (stride == 1) return max_of(x, n);
  T m = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i * stride]);
  return m;
}

template <class T>
void softmax_row(const T* x, T* y, int64_t n, int64_t stride) {
  const T m = row_max(x, n, stride);
  if (m == -std::numeric_limits<T>::infinity()) {
    for (int64_t i = 0; i < n; ++i) y[i * stride] = 0;  // every entry masked
    return;
  }
  T total = 0;
  if (stride == 1) {
    exp_shifted(x, y, n, m);
    total = sum_over<T>(n, [&](int64_t i) { return y[i]; });
  } else {
    for (int64_t i = 0; i < n; ++i) total += (y[i * stride] = std::exp(x[i * stride] - m));
  }
  const T scale = 1 / total;
  for (int64_t i = 0; i < n; ++i) y[i * stride] *= scale;
}

template <class T>
void log_softmax_row(const T* x, T* y, int64_t n, int64_t stride) {
  const T m = row_max(x, n, stride);
  if (m == -std::numeric_limits<T>::infinity()) {
    for (int64_t i = 0; i < n; ++i) y[i * stride] = m;
    return;
  }
  T total = 0;
  if (stride == 1) {
    exp_shifted(x, y, n, m);  // y is scratch until the last loop
    total = sum_over<T>(n, [&](int64_t i) { return y[i]; });
  } else {
    for (int64_t i = 0; i < n; ++i) total += std::exp(x[i * stride] - m);
  }
  // (x - m) first: m + log(total) would round away the small differences of huge logits.
  const T log_total = std::log(total);
  for (int64_t i = 0; i < n; ++i) y[i * stride] = (x[i * stride] - m) - log_total;
}

template <class T>
void log_softmax_backward_row(const T* y, const T* g, T* dx, int64_t n, int64_t stride) {
  const bool masked = row_max(y, n, stride) == -std::numeric_limits<T>::infinity();
  T total = 0;
  for (int64_t i = 0; i < n; ++i) total += g[i * stride];
  for (int64_t i = 0; i < n; ++i) {
    dx[i * stride] = masked ? T(0) : g[i * stride] - std::exp(y[i * stride]) * total;
  }
}

}  // namespace

template <class T>
void softmax_rows_forward(const T* x, T* y, const SoftmaxRows& rows) {
  for_each_row(rows, x, y, [&](const T* in, T* out) { softmax_row(in, out, rows.n, rows.inner); });
}

template <class T>
void softmax_rows_backward(const T* y, const T* g, T* dx, const SoftmaxRows& rows) {
  for_each_row(rows, g, dx, [&](const T* g_row, T* dx_row) {
    softmax_backward_row(y + (g_row - g), g_row, dx_row, rows.n, rows.inner, T(1));
  });
}

template <class T>
void log_softmax_rows_forward(const T* x, T* y, const SoftmaxRows& rows) {
  for_each_row(rows, x, y,
               [&](const T* in, T* out) { log_softmax_row(in, out, rows.n, rows.inner); });
}

template <class T>
void log_softmax_rows_backward(const T* y, const T* g, T* dx, const SoftmaxRows& rows) {
  for_each_row(rows, g, dx, [&](const T* g_row, T* dx_row) {
    log_softmax_backward_row(y + (g_row - g), g_row, dx_row, rows.n, rows.inner);
  });
}

template <class T>
double cross_entropy_forward(const T* logits, const int64_t* targets, int64_t rows, int64_t classes,
                             int64_t ignore_index, T* log_probs) {
  log_softmax_rows_forward(logits, log_probs, SoftmaxRows({rows, classes}, 1));
  double total = 0;
  for (int64_t i = 0; i < rows; ++i) {
    if (targets[i] != ignore_index) total -= log_probs[i * classes + targets[i]];
  }
  return total;
}

template <class T>
void cross_entropy_backward(const T* log_probs, const int64_t* targets, int64_t rows,
                            int64_t classes, int64_t ignore_index, T factor, T* dx) {
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t t = targets[i];
    T* row = dx + i * classes;
    if (t == ignore_index) {
      std::fill(row, row + classes, T(0));
      continue;
    }
    exp_shifted(log_probs + i * classes, row, classes, T(0));  // softmax
    for (int64_t c = 0; c < classes; ++c) row[c] = factor * (row[c] - T(c == t));
  }
}

GRADLAB_SOFTMAX_KERNELS(GRADLAB_INSTANTIATE_KERNEL)

}  // namespace gradlab::kernels
