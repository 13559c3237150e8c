// The comparisons: both sides broadcast to one shape, then one loop per relation.
#include "autograd/compare.h"

#include <functional>

#include "autograd/graph.h"
#include "autograd/reduce.h"

namespace gradlab {
namespace {

template <class Relation>
Tensor compare(const char* op, const Tensor& a, const Tensor& b) {
  check_same_dtype(op, a.dtype(), b.dtype());
  const Shape shape = broadcast_shapes(op, a.shape(), b.shape());
  const NoGradGuard no_grad;
  const Tensor left = broadcast_to(a.detach(), shape), right = broadcast_to(b.detach(), shape);
  Tensor out = Tensor::empty(shape, a.dtype());
  dispatch(a.dtype(), [&]<class T>() {
    const T* l = left.data<T>();
    const T* r = right.data<T>();
    T* o = out.mutable_data<T>();
    for (int64_t i = 0, n = out.numel(); i < n; ++i) o[i] = Relation{}(l[i], r[i]) ? T(1) : T(0);
  });
  return out;
}

Tensor number_like(const Tensor& a, double b) {
  return Tensor::scalar(b, a.dtype());
}

}  // namespace

Tensor greater(const Tensor& a, const Tensor& b) {
  return compare<std::greater<>>("greater", a, b);
}
Tensor greater_equal(const Tensor& a, const Tensor& b) {
  return compare<std::greater_equal<>>("greater_equal", a, b);
}
Tensor less(const Tensor& a, const Tensor& b) {
  return compare<std::less<>>("less", a, b);
}
Tensor less_equal(const Tensor& a, const Tensor& b) {
  return compare<std::less_equal<>>("less_equal", a, b);
}
Tensor equal(const Tensor& a, const Tensor& b) {
  return compare<std::equal_to<>>("equal", a, b);
}
Tensor not_equal(const Tensor& a, const Tensor& b) {
  return compare<std::not_equal_to<>>("not_equal", a, b);
}

Tensor greater(const Tensor& a, double b) {
  return greater(a, number_like(a, b));
}
Tensor greater_equal(const Tensor& a, double b) {
  return greater_equal(a, number_like(a, b));
}
Tensor less(const Tensor& a, double b) {
  return less(a, number_like(a, b));
}
Tensor less_equal(const Tensor& a, double b) {
  return less_equal(a, number_like(a, b));
}
Tensor equal(const Tensor& a, double b) {
  return equal(a, number_like(a, b));
}
Tensor not_equal(const Tensor& a, double b) {
  return not_equal(a, number_like(a, b));
}

}  // namespace gradlab
