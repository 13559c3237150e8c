// Element-wise ops: forward loops over contiguous buffers, backward next to each forward.
#include "autograd/elementwise.h"

#include <cmath>

#include "autograd/graph.h"
#include "autograd/kernels/elementwise.h"
#include "autograd/kernels/gelu.h"

namespace gradlab {
namespace {

// A broadcasting binary op whose backward is written with other ops.
template <OpName Op, class F, class B>
Tensor binary(const Tensor& a, const Tensor& b, F f, B backward) {
  const char* op = Op.chars;
  check_same_dtype(op, a.dtype(), b.dtype());
  const Shape shape = broadcast_shapes(op, a.shape(), b.shape());
  Tensor out = Tensor::empty(shape, a.dtype());
  dispatch(a.dtype(), [&]<class T>() {
    kernels::broadcast_zip(a.data<T>(), a.shape(), b.data<T>(), b.shape(), out.mutable_data<T>(),
                           shape, [&](T x, T y) { return f(x, y); });
  });
  return record<Op>(out, {a, b}, [a, b, backward](const Tensor& g) { return backward(g, a, b); });
}

// y = f(x) with dy/dx = df(x, y): backward is one fused loop g * df(x, y).
template <OpName Op, class F, class DF>
Tensor unary(const Tensor& x, F f, DF df) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&]<class T>() {
    kernels::map(x.data<T>(), out.mutable_data<T>(), x.numel(),
                 [&](T v) { return static_cast<T>(f(v)); });
  });
  return record<Op>(out, {x}, [x, y = out.detach(), df](const Tensor& g) {
    Tensor dx = Tensor::empty(x.shape(), x.dtype());
    dispatch(x.dtype(), [&]<class T>() {
      const T* xv = x.data<T>();
      const T* yv = y.data<T>();
      const T* gv = g.data<T>();
      T* d = dx.mutable_data<T>();
      kernels::for_chunks(x.numel(), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) d[i] = gv[i] * static_cast<T>(df(xv[i], yv[i]));
      });
    });
    return std::vector<Tensor>{dx};
  });
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  return binary<"add">(
      a, b, [](auto x, auto y) { return x + y; },
      [](const Tensor& g, const Tensor&, const Tensor&) {
        return std::vector<Tensor>{g, g};
      });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  return binary<"sub">(
      a, b, [](auto x, auto y) { return x - y; },
      [](const Tensor& g, const Tensor&, const Tensor&) {
        return std::vector<Tensor>{g, -g};
      });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  return binary<"mul">(
      a, b, [](auto x, auto y) { return x * y; },
      [](const Tensor& g, const Tensor& x, const Tensor& y) {
        return std::vector<Tensor>{x.requires_grad() ? g * y : Tensor(),
                                   y.requires_grad() ? g * x : Tensor()};
      });
}

Tensor div(const Tensor& a, const Tensor& b) {
  return binary<"div">(
      a, b, [](auto x, auto y) { return x / y; },
      [](const Tensor& g, const Tensor& x, const Tensor& y) {
        return std::vector<Tensor>{x.requires_grad() ? g / y : Tensor(),
                                   y.requires_grad() ? -(g * x) / (y * y) : Tensor()};
      });
}

Tensor add(const Tensor& a, double b) {
  return unary<"add_scalar">(
      a, [b](auto x) { return x + b; }, [](auto, auto) { return 1.0; });
}

Tensor mul(const Tensor& a, double b) {
  return unary<"mul_scalar">(
      a, [b](auto x) { return x * b; }, [b](auto, auto) { return b; });
}

Tensor rsub(const Tensor& a, double b) {
  return unary<"rsub_scalar">(
      a, [b](auto x) { return b - x; }, [](auto, auto) { return -1.0; });
}

Tensor rdiv(const Tensor& a, double b) {
  return unary<"rdiv_scalar">(
      a, [b](auto x) { return b / x; }, [](auto x, auto y) { return -y / x; });
}

Tensor neg(const Tensor& x) {
  return unary<"neg">(
      x, [](auto v) { return -v; }, [](auto, auto) { return -1.0; });
}

Tensor pow(const Tensor& x, double exponent) {
  return unary<"pow">(
      x, [exponent](auto v) { return std::pow(v, static_cast<decltype(v)>(exponent)); },
      [exponent](auto v, auto) {
        return exponent * std::pow(v, static_cast<decltype(v)>(exponent - 1));
      });
}

Tensor exp(const Tensor& x) {
  return unary<"exp">(
      x, [](auto v) { return std::exp(v); }, [](auto, auto y) { return y; });
}

Tensor log(const Tensor& x) {
  return unary<"log">(
      x, [](auto v) { return std::log(v); }, [](auto v, auto) { return 1 / v; });
}

Tensor sqrt(const Tensor& x) {
  return unary<"sqrt">(
      x, [](auto v) { return std::sqrt(v); }, [](auto, auto y) { return 0.5 / y; });
}

Tensor tanh(const Tensor& x) {
  return unary<"tanh">(
      x, [](auto v) { return std::tanh(v); }, [](auto, auto y) { return 1 - y * y; });
}

Tensor relu(const Tensor& x) {
  return unary<"relu">(
      x, [](auto v) { return v > 0 ? v : decltype(v)(0); },
      [](auto v, auto) { return v > 0 ? 1.0 : 0.0; });
}

// GELU's kernels (kernels/gelu.h) are vectorised, and its backward reads the input and the
// output instead of keeping a tensor of its own.
Tensor gelu(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&]<class T>() {
    kernels::gelu_forward(x.data<T>(), out.mutable_data<T>(), x.numel());
  });
  return record<"gelu">(out, {x}, [x, y = out.detach()](const Tensor& g) {
    Tensor dx = Tensor::empty(x.shape(), x.dtype());
    dispatch(x.dtype(), [&]<class T>() {
      kernels::gelu_backward(x.data<T>(), y.data<T>(), g.data<T>(), dx.mutable_data<T>(),
                             x.numel());
    });
    return std::vector<Tensor>{dx};
  });
}

}  // namespace gradlab
