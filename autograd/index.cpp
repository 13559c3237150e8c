// Embedding lookup and masked selection.
#include "autograd/index.h"

#include <cstring>

#include "autograd/graph.h"

namespace gradlab {
namespace {

// out = mask ? a : b, with mask, a and b broadcast to out_shape.
template <class T>
void select(const Mask& mask, const T* a, const Shape& a_shape, const T* b, const Shape& b_shape,
            T* out, const Shape& out_shape) {
  const Shape sm = broadcast_strides(mask.shape, out_shape);
  const Shape sa = broadcast_strides(a_shape, out_shape);
  const Shape sb = broadcast_strides(b_shape, out_shape);
  const size_t rank = out_shape.size();
  Shape index(rank, 0);
  int64_t om = 0, oa = 0, ob = 0;
  for (int64_t i = 0, n = numel(out_shape); i < n; ++i) {
    out[i] = mask.values[om] ? a[oa] : b[ob];
    for (size_t axis = rank; axis-- > 0;) {  // odometer step over out's index
      om += sm[axis];
      oa += sa[axis];
      ob += sb[axis];
      if (++index[axis] < out_shape[axis]) break;
      om -= sm[axis] * out_shape[axis];
      oa -= sa[axis] * out_shape[axis];
      ob -= sb[axis] * out_shape[axis];
      index[axis] = 0;
    }
  }
}

}  // namespace

Tensor embedding(const Tensor& weight, const Indices& ids) {
  if (weight.rank() != 2) {
    throw ShapeError("embedding: weight must be [V, C], got " + to_string(weight.shape()));
  }
  const int64_t vocab = weight.size(0), channels = weight.size(1);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    if (ids.values[i] < 0 || ids.values[i] >= vocab) {
      throw IndexError("embedding: id " + std::to_string(ids.values[i]) + " at position " +
                       std::to_string(i) + " is outside the vocabulary [0, " +
                       std::to_string(vocab) + ")");
    }
  }
  Shape out_shape = ids.shape;
  out_shape.push_back(channels);
  Tensor out = Tensor::empty(out_shape, weight.dtype());
  const size_t row_bytes = channels * dtype_size(weight.dtype());
  const auto* w = static_cast<const char*>(weight.node()->storage->data());
  auto* o = static_cast<char*>(out.node()->storage->data());
  for (int64_t i = 0; i < ids.numel(); ++i) {
    std::memcpy(o + i * row_bytes, w + ids.values[i] * row_bytes, row_bytes);
  }
  return record<"embedding">(out, {weight}, [ids, w_shape = weight.shape()](const Tensor& g) {
    Tensor dw = Tensor::zeros(w_shape, g.dtype());
    dispatch(g.dtype(), [&]<class T>() {
      const int64_t c = w_shape[1];
      const T* gv = g.data<T>();
      T* d = dw.mutable_data<T>();
      for (int64_t i = 0; i < ids.numel(); ++i) {
        T* row = d + ids.values[i] * c;
        for (int64_t j = 0; j < c; ++j) row[j] += gv[i * c + j];
      }
    });
    return std::vector<Tensor>{dw};
  });
}

Tensor where(const Mask& mask, const Tensor& a, const Tensor& b) {
  check_same_dtype("where", a.dtype(), b.dtype());
  const Shape shape =
      broadcast_shapes("where", mask.shape, broadcast_shapes("where", a.shape(), b.shape()));
  Tensor out = Tensor::empty(shape, a.dtype());
  dispatch(a.dtype(), [&]<class T>() {
    select(mask, a.data<T>(), a.shape(), b.data<T>(), b.shape(), out.mutable_data<T>(), shape);
  });
  return record<"where">(out, {a, b}, [mask, a, b](const Tensor& g) {
    const Tensor zero = Tensor::scalar(0, g.dtype());
    return std::vector<Tensor>{a.requires_grad() ? where(mask, g, zero) : Tensor(),
                               b.requires_grad() ? where(mask, zero, g) : Tensor()};
  });
}

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  std::vector<uint8_t> selected(static_cast<size_t>(condition.numel()));
  dispatch(condition.dtype(), [&]<class T>() {
    const T* c = condition.data<T>();
    for (size_t i = 0; i < selected.size(); ++i) selected[i] = c[i] != T(0);
  });
  return where(Mask(condition.shape(), std::move(selected)), a, b);
}

Tensor masked_fill(const Tensor& x, const Mask& mask, double value) {
  if (broadcast_shapes("masked_fill", x.shape(), mask.shape) != x.shape()) {
    throw ShapeError("masked_fill: mask " + to_string(mask.shape) +
                     " does not broadcast to input " + to_string(x.shape()));
  }
  return where(mask, Tensor::scalar(value, x.dtype()), x);
}

}  // namespace gradlab
