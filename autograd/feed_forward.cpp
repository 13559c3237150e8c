// The fused feed-forward sublayer: checks, and its kernels (kernels/feed_forward.h).
#include "autograd/feed_forward.h"

#include "autograd/graph.h"
#include "autograd/kernels/feed_forward.h"

namespace gradlab {
namespace {

constexpr const char* kOp = "feed_forward_residual";

// p must be undefined (when optional) or of shape `want`.
void check_parameter(const char* what, const Tensor& p, const Shape& want, const Tensor& x,
                     bool optional) {
  if (!p.defined()) {
    if (optional) return;
    throw ShapeError(std::string(kOp) + ": " + what + " is required");
  }
  check_same_dtype(kOp, x.dtype(), p.dtype());
  if (p.shape() != want) {
    throw ShapeError(std::string(kOp) + ": " + what + " " + to_string(p.shape()) +
                     " does not match input " + to_string(x.shape()) + " (expected " +
                     to_string(want) + ")");
  }
}

template <class T>
const T* data_or_null(const Tensor& p) {
  return p.defined() ? p.data<T>() : nullptr;
}

template <class T>
T* data_or_null(Tensor& p) {
  return p.defined() ? p.data<T>() : nullptr;
}

// What the forward keeps for the backward (kernels::FeedForwardSaved).
struct Saved {
  Tensor mean, rstd, normed, pre_gelu, post_gelu;
};

template <class T>
kernels::FeedForwardSaved<T> view(Saved s) {
  return {s.mean.data<T>(), s.rstd.data<T>(), s.normed.data<T>(), s.pre_gelu.data<T>(),
          s.post_gelu.data<T>()};
}

template <class T>
kernels::FeedForwardParams<T> view(const FeedForwardWeights& w, int64_t rows, int64_t channels,
                                   int64_t hidden) {
  return {rows,
          channels,
          hidden,
          data_or_null<T>(w.norm_weight),
          data_or_null<T>(w.norm_bias),
          static_cast<T>(w.eps),
          w.fc1_weight.data<T>(),
          data_or_null<T>(w.fc1_bias),
          w.fc2_weight.data<T>(),
          data_or_null<T>(w.fc2_bias)};
}

}  // namespace

Tensor feed_forward_residual(const Tensor& x, const FeedForwardWeights& w) {
  if (x.rank() < 1) throw ShapeError(std::string(kOp) + ": input must have at least one axis");
  if (!w.fc1_weight.defined()) throw ShapeError(std::string(kOp) + ": fc1 weight is required");
  if (w.fc1_weight.rank() != 2) {
    throw ShapeError(std::string(kOp) + ": fc1 weight " + to_string(w.fc1_weight.shape()) +
                     " must be [F, C]");
  }
  const int64_t channels = x.size(-1);                            // C
  const int64_t hidden = w.fc1_weight.size(0);                    // F
  const int64_t rows = channels == 0 ? 0 : x.numel() / channels;  // N
  check_parameter("layer norm weight", w.norm_weight, {channels}, x, true);
  check_parameter("layer norm bias", w.norm_bias, {channels}, x, true);
  check_parameter("fc1 weight", w.fc1_weight, {hidden, channels}, x, false);
  check_parameter("fc1 bias", w.fc1_bias, {hidden}, x, true);
  check_parameter("fc2 weight", w.fc2_weight, {channels, hidden}, x, false);
  check_parameter("fc2 bias", w.fc2_bias, {channels}, x, true);

  Tensor out = Tensor::empty(x.shape(), x.dtype());
  const Saved saved{Tensor::empty({rows}, x.dtype()), Tensor::empty({rows}, x.dtype()),
                    Tensor::empty({rows, channels}, x.dtype()),
                    Tensor::empty({rows, hidden}, x.dtype()),
                    Tensor::empty({rows, hidden}, x.dtype())};
  dispatch(x.dtype(), [&]<class T>() {
    kernels::feed_forward_forward(view<T>(w, rows, channels, hidden), x.data<T>(), out.data<T>(),
                                  view<T>(saved));
  });
  return record(
      kOp, out, {x, w.norm_weight, w.norm_bias, w.fc1_weight, w.fc1_bias, w.fc2_weight, w.fc2_bias},
      [x, w, saved, rows, channels, hidden](const Tensor& g) {
        std::vector<Tensor> grads{Tensor::empty(x.shape(), x.dtype())};
        for (const Tensor* p : {&w.norm_weight, &w.norm_bias, &w.fc1_weight, &w.fc1_bias,
                                &w.fc2_weight, &w.fc2_bias}) {
          grads.push_back(p->defined() ? Tensor::empty(p->shape(), p->dtype()) : Tensor());
        }
        dispatch(x.dtype(), [&]<class T>() {
          kernels::feed_forward_backward(
              view<T>(w, rows, channels, hidden), x.data<T>(), view<T>(saved), g.data<T>(),
              kernels::FeedForwardGrads<T>{grads[0].data<T>(), data_or_null<T>(grads[1]),
                                           data_or_null<T>(grads[2]), data_or_null<T>(grads[3]),
                                           data_or_null<T>(grads[4]), data_or_null<T>(grads[5]),
                                           data_or_null<T>(grads[6])});
        });
        return grads;
      });
}

}  // namespace gradlab
