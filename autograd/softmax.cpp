// Softmax, log-softmax and cross-entropy, each a fused kernel with its own backward.
#include "autograd/softmax.h"

#include <cmath>
#include <limits>

#include "autograd/graph.h"
#include "autograd/kernels/elementwise.h"
#include "autograd/kernels/rows.h"

namespace gradlab {
namespace {

// x viewed as [outer, n, inner] around the softmax axis: each (outer, inner) pair is one row
// of n elements spaced `inner` apart (inner = 1 for the last axis, the common case).
struct Rows {
  int64_t outer = 1, n = 1, inner = 1;
  Rows(const Shape& shape, int64_t axis) : n(shape[axis]) {
    for (int64_t i = 0; i < axis; ++i) outer *= shape[i];
    for (size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
  }
  int64_t count() const { return outer * inner; }
  int64_t start(int64_t row) const { return (row / inner) * n * inner + row % inner; }
};

// Runs f(in_row, out_row, stride) for every row, in parallel when the work is large.
template <class T, class F>
void for_each_row(const Rows& rows, const T* in, T* out, F f) {
#pragma omp parallel for if (rows.count() * rows.n > kernels::kParallelThreshold) schedule(static)
  for (int64_t r = 0; r < rows.count(); ++r) {
    const int64_t s = rows.start(r);
    f(in + s, out + s, rows.inner);
  }
}

template <class T>
T row_max(const T* x, int64_t n, int64_t stride) {
  if (stride == 1) return kernels::max_of(x, n);
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
    kernels::exp_shifted(x, y, n, m);
    total = kernels::sum_over<T>(n, [&](int64_t i) { return y[i]; });
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
    kernels::exp_shifted(x, y, n, m);  // y is scratch until the last loop
    total = kernels::sum_over<T>(n, [&](int64_t i) { return y[i]; });
  } else {
    for (int64_t i = 0; i < n; ++i) total += std::exp(x[i * stride] - m);
  }
  // (x - m) first: m + log(total) would round away the small differences of huge logits.
  const T log_total = std::log(total);
  for (int64_t i = 0; i < n; ++i) y[i * stride] = (x[i * stride] - m) - log_total;
}

// A new tensor with row_fn(in_row, out_row, n, stride) applied to every row of x.
template <class RowFn>
Tensor map_rows(const Tensor& x, const Rows& rows, RowFn row_fn) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&]<class T>() {
    for_each_row(rows, x.data<T>(), out.data<T>(),
                 [&](const T* in, T* o, int64_t stride) { row_fn(in, o, rows.n, stride); });
  });
  return out;
}

// The gradient of a row-wise op: row_fn(g_row, y_row, dx_row, n, stride) for every row.
template <class RowFn>
Tensor map_grad_rows(const Rows& rows, const Tensor& y, const Tensor& g, RowFn row_fn) {
  Tensor dx = Tensor::empty(g.shape(), g.dtype());
  dispatch(g.dtype(), [&]<class T>() {
    const T* yv = y.data<T>();
    const T* gv = g.data<T>();
    for_each_row(rows, gv, dx.data<T>(),
                 [&](const T* gr, T* d, int64_t s) { row_fn(gr, yv + (gr - gv), d, rows.n, s); });
  });
  return dx;
}

Rows rows_of(const char* op, const Tensor& x, int64_t axis) {
  return Rows(x.shape(), normalize_axis(op, axis, x.rank()));
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t axis) {
  const Rows rows = rows_of("softmax", x, axis);
  Tensor y = map_rows(
      x, rows, [](const auto* in, auto* o, int64_t n, int64_t s) { softmax_row(in, o, n, s); });
  // dx = y * (g - sum(g * y)) along the row.
  return record("softmax", y, {x}, [rows, y = y.detach()](const Tensor& g) {
    return std::vector<Tensor>{map_grad_rows(
        rows, y, g, [](const auto* gr, const auto* yr, auto* d, int64_t n, int64_t s) {
          using T = std::remove_const_t<std::remove_pointer_t<decltype(gr)>>;
          const T dot = kernels::sum_over<T>(n, [&](int64_t i) { return gr[i * s] * yr[i * s]; });
          for (int64_t i = 0; i < n; ++i) d[i * s] = yr[i * s] * (gr[i * s] - dot);
        })};
  });
}

Tensor log_softmax(const Tensor& x, int64_t axis) {
  const Rows rows = rows_of("log_softmax", x, axis);
  Tensor y = map_rows(
      x, rows, [](const auto* in, auto* o, int64_t n, int64_t s) { log_softmax_row(in, o, n, s); });
  // dx = g - softmax * sum(g) along the row; zero for rows that are -inf everywhere.
  return record("log_softmax", y, {x}, [rows, y = y.detach()](const Tensor& g) {
    return std::vector<Tensor>{map_grad_rows(
        rows, y, g, [](const auto* gr, const auto* yr, auto* d, int64_t n, int64_t s) {
          using T = std::remove_const_t<std::remove_pointer_t<decltype(gr)>>;
          const bool masked = row_max(yr, n, s) == -std::numeric_limits<T>::infinity();
          T total = 0;
          for (int64_t i = 0; i < n; ++i) total += gr[i * s];
          for (int64_t i = 0; i < n; ++i) {
            d[i * s] = masked ? T(0) : gr[i * s] - std::exp(yr[i * s]) * total;
          }
        })};
  });
}

Tensor cross_entropy(const Tensor& logits, const Indices& targets, int64_t ignore_index) {
  if (logits.rank() < 1) throw ShapeError("cross_entropy: logits must have a class axis");
  const Shape expected(logits.shape().begin(), logits.shape().end() - 1);
  if (targets.shape != expected) {
    throw ShapeError("cross_entropy: targets " + to_string(targets.shape) +
                     " do not match logits " + to_string(logits.shape()) +
                     " without its class axis (expected " + to_string(expected) + ")");
  }
  const int64_t classes = logits.size(-1);
  int64_t counted = 0;
  for (int64_t i = 0; i < targets.numel(); ++i) {
    const int64_t t = targets.values[i];
    if (t == ignore_index) continue;
    if (t < 0 || t >= classes) {
      throw IndexError("cross_entropy: target " + std::to_string(t) + " at position " +
                       std::to_string(i) + " is outside [0, " + std::to_string(classes) + ")");
    }
    ++counted;
  }
  const Tensor log_probs =
      map_rows(logits, rows_of("cross_entropy", logits, -1),
               [](const auto* in, auto* o, int64_t n, int64_t s) { log_softmax_row(in, o, n, s); });
  const double scale = counted > 0 ? 1.0 / static_cast<double>(counted) : 0.0;
  const double loss = dispatch(logits.dtype(), [&]<class T>() {
    const T* lp = log_probs.data<T>();
    double total = 0;
    for (int64_t i = 0; i < targets.numel(); ++i) {
      if (targets.values[i] != ignore_index) total -= lp[i * classes + targets.values[i]];
    }
    return total * scale;
  });
  Tensor out = Tensor::scalar(loss, logits.dtype());
  // d loss / d logits = (softmax - onehot(target)) / counted on counted rows, 0 elsewhere.
  return record("cross_entropy", out, {logits},
                [log_probs, targets, ignore_index, scale, classes](const Tensor& g) {
                  Tensor dx = Tensor::empty(log_probs.shape(), log_probs.dtype());
                  dispatch(g.dtype(), [&]<class T>() {
                    const T factor = static_cast<T>(g.item() * scale);
                    const T* lp = log_probs.data<T>();
                    T* d = dx.data<T>();
                    for (int64_t i = 0; i < targets.numel(); ++i) {
                      const int64_t t = targets.values[i];
                      T* row = d + i * classes;
                      if (t == ignore_index) {
                        std::fill(row, row + classes, T(0));
                        continue;
                      }
                      kernels::exp_shifted(lp + i * classes, row, classes, T(0));  // softmax
                      for (int64_t c = 0; c < classes; ++c) row[c] = factor * (row[c] - T(c == t));
                    }
                  });
                  return std::vector<Tensor>{dx};
                });
}

}  // namespace gradlab
