// Softmax, log-softmax and cross-entropy: checks, and their kernels (kernels/softmax.h) forward
// and backward.
#include "autograd/softmax.h"

#include "autograd/graph.h"
#include "autograd/kernels/softmax.h"

namespace gradlab {
namespace {

using kernels::SoftmaxRows;

SoftmaxRows rows_of(const char* op, const Tensor& x, int64_t axis) {
  return SoftmaxRows(x.shape(), normalize_axis(op, axis, x.rank()));
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t axis) {
  const SoftmaxRows rows = rows_of("softmax", x, axis);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&]<class T>() {
    kernels::softmax_rows_forward(x.data<T>(), y.mutable_data<T>(), rows);
  });
  return record<"softmax">(y, {x}, [rows, y = y.detach()](const Tensor& g) {
    Tensor dx = Tensor::empty(g.shape(), g.dtype());
    dispatch(g.dtype(), [&]<class T>() {
      kernels::softmax_rows_backward(y.data<T>(), g.data<T>(), dx.mutable_data<T>(), rows);
    });
    return std::vector<Tensor>{dx};
  });
}

Tensor log_softmax(const Tensor& x, int64_t axis) {
  const SoftmaxRows rows = rows_of("log_softmax", x, axis);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch(x.dtype(), [&]<class T>() {
    kernels::log_softmax_rows_forward(x.data<T>(), y.mutable_data<T>(), rows);
  });
  return record<"log_softmax">(y, {x}, [rows, y = y.detach()](const Tensor& g) {
    Tensor dx = Tensor::empty(g.shape(), g.dtype());
    dispatch(g.dtype(), [&]<class T>() {
      kernels::log_softmax_rows_backward(y.data<T>(), g.data<T>(), dx.mutable_data<T>(), rows);
    });
    return std::vector<Tensor>{dx};
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
  Tensor log_probs = Tensor::empty(logits.shape(), logits.dtype());
  const double scale = counted > 0 ? 1.0 / static_cast<double>(counted) : 0.0;
  const double loss = dispatch(logits.dtype(), [&]<class T>() {
    return kernels::cross_entropy_forward(logits.data<T>(), targets.values.data(), targets.numel(),
                                          classes, ignore_index, log_probs.mutable_data<T>()) *
           scale;
  });
  Tensor out = Tensor::scalar(loss, logits.dtype());
  // d loss / d logits = (softmax - onehot(target)) / counted on counted rows, 0 elsewhere.
  return record<"cross_entropy">(
      out, {logits}, [log_probs, targets, ignore_index, scale, classes](const Tensor& g) {
        Tensor dx = Tensor::empty(log_probs.shape(), log_probs.dtype());
        dispatch(g.dtype(), [&]<class T>() {
          kernels::cross_entropy_backward(log_probs.data<T>(), targets.values.data(),
                                          targets.numel(), classes, ignore_index,
                                          static_cast<T>(g.item() * scale), dx.mutable_data<T>());
        });
        return std::vector<Tensor>{dx};
      });
}

}  // namespace gradlab
