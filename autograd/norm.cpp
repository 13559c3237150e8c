// Fused layer normalisation: one pass for the statistics, one for the output; the backward
// recomputes the normalised input from the saved mean and 1/std (as llm.c does).
#include "autograd/norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/graph.h"
#include "autograd/kernels/elementwise.h"
#include "autograd/kernels/rows.h"

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

// The weight, or ones when there is none; the bias, or zeros: one row loop serves both cases,
// with no branch per element.
template <class T>
const T* weight_or(const Tensor& p, int64_t channels, T fill) {
  if (p.defined()) return p.data<T>();
  thread_local std::vector<T> fills[2];  // ones, zeros; only grow
  std::vector<T>& v = fills[fill == T(0)];
  if (static_cast<int64_t>(v.size()) < channels) v.assign(channels, fill);
  return v.data();
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
    const T* xv = x.data<T>();
    const T* w = weight_or<T>(weight, channels, 1);
    const T* b = weight_or<T>(bias, channels, 0);
    T* y = out.data<T>();
    T* mu = mean.data<T>();
    T* rs = rstd.data<T>();
#pragma omp parallel for if (x.numel() > kernels::kParallelThreshold) schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = xv + r * channels;
      const T m = kernels::sum_over<T>(channels, [&](int64_t c) { return xr[c]; }) /
                  static_cast<T>(channels);
      const T var =
          kernels::sum_over<T>(channels, [&](int64_t c) { return (xr[c] - m) * (xr[c] - m); }) /
          static_cast<T>(channels);
      const T s = 1 / std::sqrt(var + static_cast<T>(eps));
      mu[r] = m;
      rs[r] = s;
      T* yr = y + r * channels;
#pragma omp simd
      for (int64_t c = 0; c < channels; ++c) {
        const T normed = (xr[c] - m) * s;
        yr[c] = normed * w[c] + b[c];
      }
    }
  });
  return record("layer_norm", out, {x, weight, bias},
                [x, weight, bias, mean, rstd, rows, channels](const Tensor& g) {
                  // Rows go in fixed blocks, each adding its weight and bias gradients into its
                  // own partial sums, which are then added in block order: threads share the
                  // rows, and the result does not depend on how many there are.
                  constexpr int64_t kRowBlock = 64;
                  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
                  Tensor dx = Tensor::empty(x.shape(), x.dtype());
                  Tensor dw =
                      weight.defined() ? Tensor::empty(weight.shape(), x.dtype()) : Tensor();
                  Tensor db = bias.defined() ? Tensor::empty(bias.shape(), x.dtype()) : Tensor();
                  Tensor partial = Tensor::zeros({blocks, 2, channels}, x.dtype());
                  dispatch(x.dtype(), [&]<class T>() {
                    const T* xv = x.data<T>();
                    const T* gv = g.data<T>();
                    const T* w = weight_or<T>(weight, channels, 1);
                    T* dxv = dx.data<T>();
                    T* sums = partial.data<T>();
#pragma omp parallel for if (x.numel() > kernels::kParallelThreshold) schedule(static)
                    for (int64_t block = 0; block < blocks; ++block) {
                      T* dw_sum = sums + block * 2 * channels;
                      T* db_sum = dw_sum + channels;
                      const int64_t end = std::min(rows, (block + 1) * kRowBlock);
                      for (int64_t r = block * kRowBlock; r < end; ++r) {
                        const T* xr = xv + r * channels;
                        const T* gr = gv + r * channels;
                        const T m = mean.data<T>()[r], s = rstd.data<T>()[r];
                        // dxhat = g * w; dx = s * (dxhat - mean(dxhat) - xhat * mean(dxhat *
                        // xhat)).
                        const T sum_d =
                            kernels::sum_over<T>(channels, [&](int64_t c) { return gr[c] * w[c]; });
                        const T sum_dx = kernels::sum_over<T>(
                            channels, [&](int64_t c) { return gr[c] * w[c] * ((xr[c] - m) * s); });
#pragma omp simd
                        for (int64_t c = 0; c < channels; ++c) {
                          const T xhat = (xr[c] - m) * s;
                          dw_sum[c] += gr[c] * xhat;
                          db_sum[c] += gr[c];
                        }
                        const T mean_d = sum_d / static_cast<T>(channels);
                        const T mean_dx = sum_dx / static_cast<T>(channels);
                        T* dr = dxv + r * channels;
#pragma omp simd
                        for (int64_t c = 0; c < channels; ++c) {
                          const T xhat = (xr[c] - m) * s;
                          dr[c] = s * (gr[c] * w[c] - mean_d - xhat * mean_dx);
                        }
                      }
                    }
                    for (int64_t c = 0; c < channels; ++c) {
                      T dw_total = 0, db_total = 0;
                      for (int64_t block = 0; block < blocks; ++block) {
                        dw_total += sums[block * 2 * channels + c];
                        db_total += sums[(block * 2 + 1) * channels + c];
                      }
                      if (dw.defined()) dw.data<T>()[c] = dw_total;
                      if (db.defined()) db.data<T>()[c] = db_total;
                    }
                  });
                  return std::vector<Tensor>{dx, dw, db};
                });
}

}  // namespace gradlab
