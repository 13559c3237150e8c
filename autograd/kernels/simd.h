// SIMD vectors as GCC vector types, at the width of the target's registers (AVX-512, AVX or
// SSE), and the few operations on them that the compiler does not derive from scalar code:
// partial loads and stores, a sum across lanes, and transposes through registers.
// Internal to autograd/ (the GEMM, the lane attention kernel, the row kernels and GELU).
#pragma once

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

namespace gradlab::kernels::simd {

#if defined(__AVX512F__)
constexpr int kVectorBytes = 64;
#elif defined(__AVX__)
constexpr int kVectorBytes = 32;
#else
constexpr int kVectorBytes = 16;
#endif

template <class T>
using Vec [[gnu::vector_size(kVectorBytes)]] = T;
template <class T>
constexpr int kLanes = kVectorBytes / sizeof(T);

template <class T>
Vec<T> load(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class T>
void store(T* p, Vec<T> v) {
  std::memcpy(p, &v, sizeof v);
}

// The first `count` (< kLanes) elements of p as a vector, the other lanes `fill`; and the first
// `count` lanes of v stored to p. AVX-512 and AVX have masked loads and stores for this (the
// lanes past `count` are not touched); SSE takes the lanes through a small buffer. Lane-by-lane
// access to a vector keeps it in memory: a GEMM tile's accumulators stayed on the stack that way.
#if defined(__AVX__) && !defined(__AVX512F__)
// AVX's mask: lane i is all ones when i < count.
template <class T>
Vec<T> first_lanes_mask(int64_t count) {
  using Int = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  using IntVec [[gnu::vector_size(kVectorBytes)]] = Int;
  IntVec lane;
  for (int i = 0; i < kLanes<T>; ++i) lane[i] = i;
  return reinterpret_cast<Vec<T>>(lane < static_cast<Int>(count));
}
#endif

template <class T>
Vec<T> load_partial(const T* p, int64_t count, T fill = 0) {
  const Vec<T> rest = Vec<T>{} + fill;
#if defined(__AVX512F__)
  const auto mask = static_cast<uint16_t>((1u << count) - 1);
  if constexpr (sizeof(T) == 4) {
    return reinterpret_cast<Vec<T>>(_mm512_mask_loadu_ps(reinterpret_cast<__m512>(rest), mask, p));
  } else {
    return reinterpret_cast<Vec<T>>(
        _mm512_mask_loadu_pd(reinterpret_cast<__m512d>(rest), static_cast<uint8_t>(mask), p));
  }
#elif defined(__AVX__)
  const Vec<T> mask = first_lanes_mask<T>(count);
  Vec<T> loaded;
  if constexpr (sizeof(T) == 4) {
    loaded = reinterpret_cast<Vec<T>>(_mm256_maskload_ps(p, reinterpret_cast<__m256i>(mask)));
  } else {
    loaded = reinterpret_cast<Vec<T>>(_mm256_maskload_pd(p, reinterpret_cast<__m256i>(mask)));
  }
  using Int = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  using IntVec [[gnu::vector_size(kVectorBytes)]] = Int;
  return reinterpret_cast<IntVec>(mask) != 0 ? loaded : rest;
#else
  T lanes[kLanes<T>];
  store<T>(lanes, rest);
  std::copy_n(p, count, lanes);
  return load<T>(lanes);
#endif
}

template <class T>
void store_partial(T* p, Vec<T> v, int64_t count) {
#if defined(__AVX512F__)
  const auto mask = static_cast<uint16_t>((1u << count) - 1);
  if constexpr (sizeof(T) == 4) {
    _mm512_mask_storeu_ps(p, mask, reinterpret_cast<__m512>(v));
  } else {
    _mm512_mask_storeu_pd(p, static_cast<uint8_t>(mask), reinterpret_cast<__m512d>(v));
  }
#elif defined(__AVX__)
  const auto mask = reinterpret_cast<__m256i>(first_lanes_mask<T>(count));
  if constexpr (sizeof(T) == 4) {
    _mm256_maskstore_ps(p, mask, reinterpret_cast<__m256>(v));
  } else {
    _mm256_maskstore_pd(p, mask, reinterpret_cast<__m256d>(v));
  }
#else
  T lanes[kLanes<T>];
  store<T>(lanes, v);
  std::copy_n(lanes, count, p);
#endif
}

// The first `count` (<= kLanes) elements of p, the rest zero; and the first `count` lanes of v
// stored to p.
template <class T>
Vec<T> load_first(const T* p, int64_t count) {
  return count == kLanes<T> ? load<T>(p) : load_partial<T>(p, count);
}

template <class T>
void store_first(T* p, Vec<T> v, int64_t count) {
  if (count == kLanes<T>) {
    store<T>(p, v);
  } else {
    store_partial<T>(p, v, count);
  }
}

// A vector-aligned area of `count` elements in a buffer that only grows, so that steady-state
// calls allocate nothing.
template <class T>
T* aligned_scratch(std::vector<T>& buffer, int64_t count) {
  constexpr int64_t slack = kLanes<T>;
  if (static_cast<int64_t>(buffer.size()) < count + slack) buffer.resize(count + slack);
  const auto address = reinterpret_cast<std::uintptr_t>(buffer.data());
  return buffer.data() + (kVectorBytes - address % kVectorBytes) % kVectorBytes / sizeof(T);
}

// op(v, v rotated by Shift lanes).
template <class T, int Shift, class Op, size_t... I>
Vec<T> combine_rotated(Vec<T> v, Op op, std::index_sequence<I...>) {
  return op(v, __builtin_shufflevector(v, v, ((I + Shift) % kLanes<T>)...));
}

// v's lanes combined by op (associative and commutative: a sum, a maximum) in log2(kLanes)
// rotate-and-combine steps; lane by lane it is a chain of kLanes dependent steps.
template <class T, class Op, int Shift = kLanes<T> / 2>
T reduce_lanes(Vec<T> v, Op op) {
  if constexpr (Shift == 0) {
    return v[0];
  } else {
    return reduce_lanes<T, Op, Shift / 2>(
        combine_rotated<T, Shift>(v, op, std::make_index_sequence<kLanes<T>>{}), op);
  }
}

template <class T>
T sum_lanes(Vec<T> v) {
  return reduce_lanes<T>(v, [](Vec<T> a, Vec<T> b) { return a + b; });
}

template <class T>
T max_lanes(Vec<T> v) {
  return reduce_lanes<T>(v, [](Vec<T> a, Vec<T> b) { return a < b ? b : a; });
}

// The first (with High, the last) halves of a and b, interleaved: a0 b0 a1 b1 ...
template <class T, bool High, size_t... I>
Vec<T> interleave(Vec<T> a, Vec<T> b, std::index_sequence<I...>) {
  constexpr size_t lanes = kLanes<T>;
  return __builtin_shufflevector(a, b, ((I % 2 ? lanes : 0) + (High ? lanes / 2 : 0) + I / 2)...);
}

// Transposes the kLanes x kLanes block whose rows are rows[0 .. kLanes): log2(kLanes) rounds
// of interleaving row i with row i + kLanes / 2, each a perfect shuffle of the element index.
template <class T>
void transpose_block(Vec<T>* rows) {
  constexpr int lanes = kLanes<T>;
  constexpr auto all = std::make_index_sequence<lanes>{};
  for (int round = 1; round < lanes; round *= 2) {
    Vec<T> next[lanes];
    for (int i = 0; i < lanes / 2; ++i) {
      next[2 * i] = interleave<T, false>(rows[i], rows[i + lanes / 2], all);
      next[2 * i + 1] = interleave<T, true>(rows[i], rows[i + lanes / 2], all);
    }
    for (int i = 0; i < lanes; ++i) rows[i] = next[i];
  }
}

// dst [cols, rows] (row stride dst_stride) = the transpose of src [rows, cols] (row stride
// src_stride): whole kLanes x kLanes blocks through registers (element by element, the GEMM's
// transposed packing was 4% of a training step), the ragged edges element by element.
template <class T>
void transpose(const T* src, int64_t src_stride, int64_t rows, int64_t cols, T* dst,
               int64_t dst_stride) {
  constexpr int64_t lanes = kLanes<T>;
  const int64_t block_rows = rows / lanes * lanes, block_cols = cols / lanes * lanes;
  for (int64_t i = 0; i < block_rows; i += lanes) {
    for (int64_t j = 0; j < block_cols; j += lanes) {
      Vec<T> block[lanes];
      for (int64_t r = 0; r < lanes; ++r) block[r] = load<T>(src + (i + r) * src_stride + j);
      transpose_block<T>(block);
      for (int64_t r = 0; r < lanes; ++r) store<T>(dst + (j + r) * dst_stride + i, block[r]);
    }
  }
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = i < block_rows ? block_cols : 0; j < cols; ++j)
      dst[j * dst_stride + i] = src[i * src_stride + j];
  }
}

}  // namespace gradlab::kernels::simd
