// Fused layer normalisation: one pass for the statistics, one for the output; the backward
// recomputes the normalised input from the saved mean and 1/std (as llm.c does).
#include "autograd/norm.h"

#include <algorithm>
#include <cmath>

#include "autograd/graph.h"
#include "autograd/kernels.h"

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
    const T* w = weight.defined() ? weight.data<T>() : nullptr;
    const T* b = bias.defined() ? bias.data<T>() : nullptr;
    T* y = out.data<T>();
    T* mu = mean.data<T>();
    T* rs = rstd.data<T>();
#pragma omp parallel for if (x.numel() > kernels::kParallelThreshold) schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = xv + r * channels;
      T m = 0;
#pragma omp simd reduction(+ : m)
      for (int64_t c = 0; c < channels; ++c) m += xr[c];
      m /= static_cast<T>(channels);
      T var = 0;
#pragma omp simd reduction(+ : var)
      for (int64_t c = 0; c < channels; ++c) var += (xr[c] - m) * (xr[c] - m);
      var /= static_cast<T>(channels);
      const T s = 1 / std::sqrt(var + static_cast<T>(eps));
      mu[r] = m;
      rs[r] = s;
      T* yr = y + r * channels;
#pragma omp simd
      for (int64_t c = 0; c < channels; ++c) {
        const T normed = (xr[c] - m) * s;
        yr[c] = normed * (w ? w[c] : T(1)) + (b ? b[c] : T(0));
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
                    const T* w = weight.defined() ? weight.data<T>() : nullptr;
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
                        T sum_d = 0, sum_dx = 0;
#pragma omp simd reduction(+ : sum_d, sum_dx)
                        for (int64_t c = 0; c < channels; ++c) {
                          const T xhat = (xr[c] - m) * s;
                          const T d = gr[c] * (w ? w[c] : T(1));
                          sum_d += d;
                          sum_dx += d * xhat;
                          dw_sum[c] += gr[c] * xhat;
                          db_sum[c] += gr[c];
                        }
                        const T mean_d = sum_d / static_cast<T>(channels);
                        const T mean_dx = sum_dx / static_cast<T>(channels);
                        T* dr = dxv + r * channels;
#pragma omp simd
                        for (int64_t c = 0; c < channels; ++c) {
                          const T xhat = (xr[c] - m) * s;
                          dr[c] = s * (gr[c] * (w ? w[c] : T(1)) - mean_d - xhat * mean_dx);
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
