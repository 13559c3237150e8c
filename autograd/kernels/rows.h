// The short-row primitives of softmax, log-softmax, cross-entropy, layer norm and attention:
// a sum in partial sums, a vectorised maximum and a vectorised exp(x - shift). Each works on n
// contiguous elements of one row ([n]); callers loop over rows.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "autograd/kernels/simd.h"

namespace gradlab::kernels {

// The sum of term(i) over i in [0, n): kLanes interleaved partial sums (one vector) added in
// a tree at the end, and the tail. `#pragma omp simd reduction` compiled to a vector loop and
// then kLanes dependent scalar adds of the partial sums, about 60 cycles per call: on the
// 64-element rows of layer norm that was most of the time.
template <class T, class Term>
T sum_over(int64_t n, Term term) {
  constexpr int64_t lanes = simd::kLanes<T>;
  T partial[lanes] = {};
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    for (int64_t l = 0; l < lanes; ++l) partial[l] += term(i + l);
  }
  T tail = 0;
  for (; i < n; ++i) tail += term(i);
  return simd::sum_lanes<T>(simd::load<T>(partial)) + tail;
}

// The largest of n contiguous elements (-inf when n is 0). A plain max loop stays scalar (a
// 4-cycle dependency per element) even under omp simd, and Eigen's reduction over a dynamic-size
// map is scalar too for rows too short for its aligned path (attention rows of 20 scores): with
// AVX-512, float rows take whole vectors, a masked load for the tail, then halve pairwise.
template <class T>
T max_of(const T* x, int64_t n) {
  constexpr T minus_inf = -std::numeric_limits<T>::infinity();
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    using simd::Vec;
    using V8 [[gnu::vector_size(32)]] = float;
    using V4 [[gnu::vector_size(16)]] = float;
    constexpr int64_t lanes = simd::kLanes<float>;  // 16
    auto larger = [](auto a, auto b) { return a < b ? b : a; };
    Vec<float> best = Vec<float>{} + minus_inf;
    int64_t start = 0;
    for (; start + lanes <= n; start += lanes) best = larger(best, simd::load<float>(x + start));
    if (start < n) best = larger(best, simd::load_partial<float>(x + start, n - start, minus_inf));
    const V8 half = larger(__builtin_shufflevector(best, best, 0, 1, 2, 3, 4, 5, 6, 7),
                           __builtin_shufflevector(best, best, 8, 9, 10, 11, 12, 13, 14, 15));
    const V4 quarter = larger(__builtin_shufflevector(half, half, 0, 1, 2, 3),
                              __builtin_shufflevector(half, half, 4, 5, 6, 7));
    return std::max(std::max(quarter[0], quarter[1]), std::max(quarter[2], quarter[3]));
  }
#endif
  if (n == 0) return minus_inf;
  return Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(x, n).maxCoeff();
}

// y[i] = exp(x[i] - shift) over n contiguous elements (x == y allowed). Eigen's vectorised exp:
// calling libm's scalar expf per score was a tenth of an attention step. It runs on fixed-size
// blocks, the last one filled by masked loads, because on a dynamic-size map Eigen falls back to
// scalar calls for the unaligned head and the tail, which for short attention rows (often 20 to
// 64 scores) was most of the row; copying the tail with std::copy cost a library call each way
// on the 12-class rows of cross-entropy. Callers that need the sum take it with sum_over: the
// `omp simd` sum this returned ended in a chain of kLanes scalar adds.
template <class T>
void exp_shifted(const T* x, T* y, int64_t n, T shift) {
  using Block = Eigen::Array<T, 16, 1>;  // a whole number of SIMD vectors
  constexpr int64_t size = Block::SizeAtCompileTime, lanes = simd::kLanes<T>;
  // Eigen clamps the argument, so exp(-inf) comes out as a denormal instead of the exact 0 a
  // masked entry needs: denormals (far below any sum's precision here) are flushed to zero.
  auto exp_of = [shift](const Block& in) -> Block {
    Block out = (in - shift).exp();
    for (int64_t v = 0; v < size; v += lanes) {
      const simd::Vec<T> e = simd::load<T>(out.data() + v);
      simd::store<T>(out.data() + v, e < std::numeric_limits<T>::min() ? simd::Vec<T>{} : e);
    }
    return out;
  };
  for (int64_t start = 0; start < n; start += size) {
    const int64_t count = std::min(size, n - start);
    if (count == size) {
      Eigen::Map<Block>(y + start) = exp_of(Eigen::Map<const Block>(x + start));
      continue;
    }
    // Lanes past the tail hold zeros, whose exp is computed and dropped.
    Block block = Block::Zero();
    for (int64_t v = 0; v < count; v += lanes) {
      simd::store<T>(block.data() + v,
                     simd::load_first<T>(x + start + v, std::min(lanes, count - v)));
    }
    block = exp_of(block);
    for (int64_t v = 0; v < count; v += lanes) {
      simd::store_first<T>(y + start + v, simd::load<T>(block.data() + v),
                           std::min(lanes, count - v));
    }
  }
}

}  // namespace gradlab::kernels
