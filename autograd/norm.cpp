// Layer normalisation: checks, and its fused kernels (kernels/layer_norm.h) forward and
// backward.
#include "autograd/norm.h"

#include "autograd/graph.h"
#include "autograd/kernels/layer_norm.h"

namespace gradlab {
namespace {

void check_affine(const char* what, const Tensor& p, const Tensor& x) {
  if (!p.defined()) return;
  check_same_dtype("layer_norm", x.dtype(), p.dtype());
  if (p.shape() != Shape{x.size(-1)}) {
    throw ShapeError(std::string("layer_norm: ") + what + " " + to_string(p.shape()) +
                     " does not match the last axis of input " + to_string(x.shape()) +
                     " (expected [" + std::to_string(x.size(-1)) + "])");
  }
}

// The tensor's values, or null when it is not given.
template <class T>
const T* data_or_null(const Tensor& p) {
  return p.defined() ? p.data<T>() : nullptr;
}

template <class T>
T* mutable_data_or_null(Tensor& p) {
  return p.defined() ? p.mutable_data<T>() : nullptr;
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  if (x.rank() < 1) throw ShapeError("layer_norm: input must have at least one axis");
  check_affine("weight", weight, x);
  check_affine("bias", bias, x);
  const int64_t channels = x.size(-1);  // C
  const int64_t rows = channels == 0 ? 0 : x.numel() / channels;
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  Tensor mean = Tensor::empty({rows}, x.dtype());
  Tensor rstd = Tensor::empty({rows}, x.dtype());
  dispatch(x.dtype(), [&]<class T>() {
    kernels::layer_norm_forward(x.data<T>(), data_or_null<T>(weight), data_or_null<T>(bias),
                                static_cast<T>(eps), rows, channels, out.mutable_data<T>(),
                                mean.mutable_data<T>(), rstd.mutable_data<T>());
  });
  return record<"layer_norm">(
      out, {x, weight, bias}, [x, weight, bias, mean, rstd, rows, channels](const Tensor& g) {
        Tensor dx = Tensor::empty(x.shape(), x.dtype());
        Tensor dw = weight.defined() ? Tensor::empty(weight.shape(), x.dtype()) : Tensor();
        Tensor db = bias.defined() ? Tensor::empty(bias.shape(), x.dtype()) : Tensor();
        dispatch(x.dtype(), [&]<class T>() {
          kernels::layer_norm_backward(x.data<T>(), g.data<T>(), data_or_null<T>(weight),
                                       mean.data<T>(), rstd.data<T>(), rows, channels,
                                       dx.mutable_data<T>(), mutable_data_or_null<T>(dw),
                                       mutable_data_or_null<T>(db));
        });
        return std::vector<Tensor>{dx, dw, db};
      });
}

}  // namespace gradlab
