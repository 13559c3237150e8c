// Fused layer normalisation: one pass for the statistics, one for the output; the backward
// recomputes the normalised input from the saved mean and 1/std (as llm.c does).
#include "autograd/norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

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
    // Statistics for kLanes rows at a time: row by row, each row's sums ended in a chain of
    // dependent adds and then a square root and a division, and the rows barely overlapped.
    constexpr int64_t lanes = kernels::simd::kLanes<T>;
    const int64_t blocks = (rows + lanes - 1) / lanes;
#pragma omp parallel for if (x.numel() > kernels::kParallelThreshold) schedule(static)
    for (int64_t block = 0; block < blocks; ++block) {
      const int64_t first = block * lanes, count = std::min(lanes, rows - first);
      const T* xb = xv + first * channels;
      auto x_at = [&](int64_t r, int64_t c) { return xb[r * channels + c]; };
      const T n = static_cast<T>(channels);
      T m[lanes], s[lanes];
      kernels::simd::store<T>(m, kernels::row_sums<T>(count, channels, x_at) / n);
      auto squared_deviation = [&](int64_t r, int64_t c) {
        const T centred = x_at(r, c) - m[r];
        return centred * centred;
      };
      const kernels::simd::Vec<T> var =
          kernels::row_sums<T>(count, channels, squared_deviation) / n;
      for (int64_t r = 0; r < lanes; ++r) s[r] = 1 / std::sqrt(var[r] + static_cast<T>(eps));
      for (int64_t r = 0; r < count; ++r) {
        const T* xr = xb + r * channels;
        mu[first + r] = m[r];
        rs[first + r] = s[r];
        T* yr = y + (first + r) * channels;
#pragma omp simd
        for (int64_t c = 0; c < channels; ++c) {
          const T normed = (xr[c] - m[r]) * s[r];
          yr[c] = normed * w[c] + b[c];
        }
      }
    }
  });
  return record(
      "layer_norm", out, {x, weight, bias},
      [x, weight, bias, mean, rstd, rows, channels](const Tensor& g) {
        // Rows go in fixed blocks, each adding its weight and bias gradients into its
        // own partial sums, which are then added in block order: threads share the
        // rows, and the result does not depend on how many there are.
        constexpr int64_t kRowBlock = 64;
        static_assert(kRowBlock % kernels::simd::kLanes<double> == 0 &&
                      kRowBlock % kernels::simd::kLanes<float> == 0);
        const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock;
        Tensor dx = Tensor::empty(x.shape(), x.dtype());
        Tensor dw = weight.defined() ? Tensor::empty(weight.shape(), x.dtype()) : Tensor();
        Tensor db = bias.defined() ? Tensor::empty(bias.shape(), x.dtype()) : Tensor();
        Tensor partial = Tensor::zeros({blocks, 2, channels}, x.dtype());
        dispatch(x.dtype(), [&]<class T>() {
          const T* xv = x.data<T>();
          const T* gv = g.data<T>();
          const T* w = weight_or<T>(weight, channels, 1);
          T* dxv = dx.data<T>();
          T* sums = partial.data<T>();
          constexpr int64_t lanes = kernels::simd::kLanes<T>;
#pragma omp parallel for if (x.numel() > kernels::kParallelThreshold) schedule(static)
          for (int64_t block = 0; block < blocks; ++block) {
            T* dw_sum = sums + block * 2 * channels;
            T* db_sum = dw_sum + channels;
            const int64_t end = std::min(rows, (block + 1) * kRowBlock);
            // kLanes rows' sums at a time, as in the forward.
            for (int64_t first = block * kRowBlock; first < end; first += lanes) {
              const int64_t count = std::min(lanes, end - first);
              const T* xb = xv + first * channels;
              const T* gb = gv + first * channels;
              const T* mb = mean.data<T>() + first;
              const T* sb = rstd.data<T>() + first;
              // dxhat = g * w; dx = s * (dxhat - mean(dxhat) - xhat * mean(dxhat *
              // xhat)).
              T sum_d[lanes], sum_dx[lanes];
              kernels::simd::store<T>(
                  sum_d, kernels::row_sums<T>(count, channels, [&](int64_t r, int64_t c) {
                    return gb[r * channels + c] * w[c];
                  }));
              kernels::simd::store<T>(
                  sum_dx, kernels::row_sums<T>(count, channels, [&](int64_t r, int64_t c) {
                    const int64_t i = r * channels + c;
                    return gb[i] * w[c] * ((xb[i] - mb[r]) * sb[r]);
                  }));
              for (int64_t r = 0; r < count; ++r) {
                const T* xr = xb + r * channels;
                const T* gr = gb + r * channels;
                const T m = mb[r], s = sb[r];
#pragma omp simd
                for (int64_t c = 0; c < channels; ++c) {
                  const T xhat = (xr[c] - m) * s;
                  dw_sum[c] += gr[c] * xhat;
                  db_sum[c] += gr[c];
                }
                const T mean_d = sum_d[r] / static_cast<T>(channels);
                const T mean_dx = sum_dx[r] / static_cast<T>(channels);
                T* dr = dxv + (first + r) * channels;
#pragma omp simd
                for (int64_t c = 0; c < channels; ++c) {
                  const T xhat = (xr[c] - m) * s;
                  dr[c] = s * (gr[c] * w[c] - mean_d - xhat * mean_dx);
                }
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
