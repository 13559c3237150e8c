// The short-row primitives of softmax, log-softmax, cross-entropy, layer norm and attention:
// a sum in partial sums, a vectorised maximum and a vectorised exp(x - shift). Each works on n
// contiguous elements of one row ([n]); callers loop over rows. Also the exp of one vector.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <cstring>
#include <limits>

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

// The largest of n contiguous elements (-inf when n is 0), in vectors with a masked tail: a
// plain max loop stays scalar (a 4-cycle dependency per element) even under omp simd, and
// Eigen's reduction over a dynamic-size map is scalar too for rows too short for its aligned
// path (attention rows of 20 scores).
template <class T>
T max_of(const T* x, int64_t n) {
  using simd::Vec;
  constexpr T minus_inf = -std::numeric_limits<T>::infinity();
  constexpr int64_t lanes = simd::kLanes<T>;
  Vec<T> best = Vec<T>{} + minus_inf;
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const Vec<T> v = simd::load<T>(x + i);
    best = best < v ? v : best;
  }
  if (i < n) {
    const Vec<T> v = simd::load_partial<T>(x + i, n - i, minus_inf);
    best = best < v ? v : best;
  }
  return simd::max_lanes<T>(best);
}

// exp of every lane of x: Eigen's vectorised exp (the one its arrays run) on one register, so
// that short rows need neither a library call nor a copy through an array. Eigen clamps the
// argument, so exp(-inf) comes out as a denormal instead of the exact 0 a masked entry needs:
// denormals (far below any sum's precision here) are flushed to zero.
template <class T>
simd::Vec<T> exp_lanes(simd::Vec<T> x) {
  using Packet = typename Eigen::internal::packet_traits<T>::type;
  static_assert(sizeof(Packet) == sizeof(simd::Vec<T>), "Eigen's packets are the SIMD width");
  Packet p;
  std::memcpy(&p, &x, sizeof p);
  p = Eigen::internal::pexp(p);
  simd::Vec<T> e;
  std::memcpy(&e, &p, sizeof e);
  return e < std::numeric_limits<T>::min() ? simd::Vec<T>{} : e;
}

// y[i] = exp(x[i] - shift) over n contiguous elements (x == y allowed), in vectors, the tail by
// partial loads and stores: calling libm's scalar expf per score was a tenth of an attention
// step, and Eigen on a dynamic-size map falls back to scalar calls for the unaligned head and
// the tail, which for short attention rows (often 20 to 64 scores) was most of the row. Callers
// that need the sum take it with sum_over: the `omp simd` sum this returned ended in a chain of
// kLanes scalar adds.
template <class T>
void exp_shifted(const T* x, T* y, int64_t n, T shift) {
  constexpr int64_t lanes = simd::kLanes<T>;
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes)
    simd::store<T>(y + i, exp_lanes<T>(simd::load<T>(x + i) - shift));
  if (i < n)
    simd::store_partial<T>(y + i, exp_lanes<T>(simd::load_partial<T>(x + i, n - i) - shift), n - i);
}

}  // namespace gradlab::kernels
