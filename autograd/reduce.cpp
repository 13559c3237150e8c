// Reductions and their gradients. sum and broadcast_to are each other's backward.
#include "autograd/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "autograd/elementwise.h"
#include "autograd/graph.h"
#include "autograd/kernels/elementwise.h"
#include "autograd/kernels/rows.h"
#include "autograd/shape_ops.h"

namespace gradlab {
namespace {

// The reduced axes and the result shapes with (kept) and without (dropped) them.
struct Reduction {
  Shape kept, dropped;
  Reduction(const char* op, const Shape& shape, const std::vector<int64_t>& axes) : kept(shape) {
    std::vector<bool> reduced(shape.size(), false);
    for (int64_t axis : axes) {
      const int64_t a = normalize_axis(op, axis, static_cast<int64_t>(shape.size()));
      if (reduced[a]) {
        throw AxisError(std::string(op) + ": axis " + std::to_string(axis) + " repeated");
      }
      reduced[a] = true;
      kept[a] = 1;
    }
    for (size_t i = 0; i < shape.size(); ++i) {
      if (!reduced[i]) dropped.push_back(shape[i]);
    }
  }
};

// out (shape `kept`, zeroed) += x summed over the axes where kept is 1 and x is not.
template <class T>
void sum_into(const T* x, const Shape& x_shape, T* out, const Shape& kept) {
  const int64_t n = numel(x_shape);
  if (n == 0) return;
  const Shape out_strides = broadcast_strides(kept, x_shape);
  const size_t rank = x_shape.size();
  if (rank == 0) {
    out[0] += x[0];
    return;
  }
  const int64_t inner = x_shape[rank - 1];
  const int64_t inner_stride = out_strides[rank - 1];
  const int64_t rows = n / inner;
  // Summing over every leading axis (a bias gradient) keeps one row of out: no index arithmetic.
  const bool one_out_row =
      std::all_of(out_strides.begin(), out_strides.end() - 1, [](int64_t s) { return s == 0; });
  auto out_offset = [&](int64_t row) {
    if (one_out_row) return int64_t{0};
    int64_t offset = 0, rest = row;
    for (size_t axis = rank - 1; axis-- > 0;) {
      offset += (rest % x_shape[axis]) * out_strides[axis];
      rest /= x_shape[axis];
    }
    return offset;
  };
  if (inner_stride == 0) {
    for (int64_t row = 0; row < rows; ++row) {
      const T* xr = x + row * inner;
      out[out_offset(row)] += kernels::sum_over<T>(inner, [&](int64_t j) { return xr[j]; });
    }
    return;
  }
  // The last axis is kept (a bias gradient, say): threads take ranges of it, each adding every
  // row's part in row order, so no element is shared and the order does not depend on threads.
  // The chunks of all n elements that for_chunks hands out map to column ranges.
  kernels::for_chunks(n, [&](int64_t begin, int64_t end) {
    const int64_t first = begin / rows, last = end / rows;  // columns [first, last)
    for (int64_t row = 0; row < rows; ++row) {
      const T* xr = x + row * inner;
      T* o = out + out_offset(row);
      for (int64_t j = first; j < last; ++j) o[j] += xr[j];
    }
  });
}

// The reduction shared by sum and sum_to: result has shape `kept` (keepdim layout).
Tensor sum_kept(const Tensor& x, const Shape& kept) {
  Tensor out = Tensor::zeros(kept, x.dtype());
  dispatch(x.dtype(),
           [&]<class T>() { sum_into(x.data<T>(), x.shape(), out.mutable_data<T>(), kept); });
  return out;
}

template <OpName Op>
Tensor sum_impl(const Tensor& x, const Shape& kept, const Shape& out_shape) {
  Tensor out = reshape(sum_kept(x.detach(), kept), out_shape);
  return record<Op>(out, {x}, [kept, x_shape = x.shape()](const Tensor& g) {
    return std::vector<Tensor>{broadcast_to(reshape(g, kept), x_shape)};
  });
}

// (outer, n, inner) view of x around axis: element (o, i, k) sits at (o * n + i) * inner + k.
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
  AxisView(const Shape& shape, int64_t axis) : n(shape[axis]) {
    for (int64_t i = 0; i < axis; ++i) outer *= shape[i];
    for (size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
  }
};

// Index of the first maximum along axis for each (outer, inner) position.
std::vector<int64_t> argmax_positions(const Tensor& x, int64_t axis) {
  const AxisView v(x.shape(), axis);
  std::vector<int64_t> best(v.outer * v.inner, 0);
  dispatch(x.dtype(), [&]<class T>() {
    const T* p = x.data<T>();
    for (int64_t o = 0; o < v.outer; ++o) {
      for (int64_t k = 0; k < v.inner; ++k) {
        const T* base = p + o * v.n * v.inner + k;
        int64_t arg = 0;
        for (int64_t i = 1; i < v.n; ++i) {
          if (base[i * v.inner] > base[arg * v.inner] || std::isnan(base[i * v.inner])) {
            arg = i;
            if (std::isnan(base[i * v.inner])) break;
          }
        }
        best[o * v.inner + k] = arg;
      }
    }
  });
  return best;
}

Shape reduced_shape(const Shape& shape, int64_t axis, bool keepdim) {
  Shape out = shape;
  if (keepdim) {
    out[axis] = 1;
  } else {
    out.erase(out.begin() + axis);
  }
  return out;
}

int64_t checked_axis(const char* op, const Tensor& x, int64_t axis) {
  const int64_t a = normalize_axis(op, axis, x.rank());
  if (x.shape()[a] == 0) {
    throw ShapeError(std::string(op) + ": cannot reduce an empty axis " + std::to_string(axis) +
                     " of shape " + to_string(x.shape()));
  }
  return a;
}

}  // namespace

Tensor sum(const Tensor& x) {
  return sum_impl<"sum">(x, Shape(x.rank(), 1), {});
}

Tensor sum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  const Reduction r("sum", x.shape(), axes);
  return sum_impl<"sum">(x, r.kept, keepdim ? r.kept : r.dropped);
}

Tensor mean(const Tensor& x) {
  return sum(x) / static_cast<double>(std::max<int64_t>(x.numel(), 1));
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  const Reduction r("mean", x.shape(), axes);
  const int64_t count = x.numel() / std::max<int64_t>(numel(r.kept), 1);
  return sum(x, axes, keepdim) / static_cast<double>(std::max<int64_t>(count, 1));
}

Tensor max(const Tensor& x, int64_t axis, bool keepdim) {
  const int64_t a = checked_axis("max", x, axis);
  const std::vector<int64_t> best = argmax_positions(x, a);
  const AxisView v(x.shape(), a);
  Tensor out = Tensor::empty(reduced_shape(x.shape(), a, keepdim), x.dtype());
  dispatch(x.dtype(), [&]<class T>() {
    const T* p = x.data<T>();
    T* o = out.mutable_data<T>();
    for (int64_t j = 0; j < v.outer * v.inner; ++j) {
      const int64_t outer = j / v.inner, k = j % v.inner;
      o[j] = p[(outer * v.n + best[j]) * v.inner + k];
    }
  });
  return record<"max">(out, {x}, [best, v, x_shape = x.shape()](const Tensor& g) {
    Tensor dx = Tensor::zeros(x_shape, g.dtype());
    dispatch(g.dtype(), [&]<class T>() {
      const T* gv = g.data<T>();
      T* d = dx.mutable_data<T>();
      for (int64_t j = 0; j < v.outer * v.inner; ++j) {
        d[(j / v.inner * v.n + best[j]) * v.inner + j % v.inner] = gv[j];
      }
    });
    return std::vector<Tensor>{dx};
  });
}

Indices argmax(const Tensor& x, int64_t axis, bool keepdim) {
  const int64_t a = checked_axis("argmax", x, axis);
  return Indices(reduced_shape(x.shape(), a, keepdim), argmax_positions(x, a));
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  if (broadcast_shapes("broadcast_to", x.shape(), shape) != shape) {
    throw ShapeError("broadcast_to: shape " + to_string(x.shape()) + " cannot be broadcast to " +
                     to_string(shape));
  }
  if (x.shape() == shape) return x;
  Tensor out = Tensor::empty(shape, x.dtype());
  dispatch(x.dtype(), [&]<class T>() {
    const T zero = 0;
    kernels::broadcast_zip(x.data<T>(), x.shape(), &zero, Shape{}, out.mutable_data<T>(), shape,
                           [](T a, T) { return a; });
  });
  return record<"broadcast_to">(out, {x}, [x_shape = x.shape()](const Tensor& g) {
    return std::vector<Tensor>{sum_to(g, x_shape)};
  });
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  if (broadcast_shapes("sum_to", shape, x.shape()) != x.shape()) {
    throw ShapeError("sum_to: shape " + to_string(x.shape()) + " cannot be reduced to " +
                     to_string(shape));
  }
  // Leading axes that broadcasting added are summed away as well.
  Shape kept(x.rank() - shape.size(), 1);
  kept.insert(kept.end(), shape.begin(), shape.end());
  return sum_impl<"sum_to">(x, kept, shape);
}

}  // namespace gradlab
