#include "autograd/kernels/gemm.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "autograd/kernels/kernel_list.h"
#include "autograd/kernels/simd.h"

namespace gradlab::kernels {
namespace {

// The register tile is kRows rows of C by up to kMaxVectors SIMD vectors (narrower ones take
// more rows: tall_rows). Its accumulators, one vector of B per column block and the broadcast
// element of A must fit in the vector registers (32 with AVX-512, 16 below it), or the
// compiler spills them inside the innermost loop.
#if defined(__AVX512F__)
constexpr int64_t kRows = 6;
constexpr int kMaxVectors = 4;
#else
constexpr int64_t kRows = 4;
constexpr int kMaxVectors = 3;
#endif
// k-steps per packed block and columns of C per group. A group's packed k-block of B (128 K
// elements, 512 KiB of float) fits the second-level cache however wide B is, and a panel of it
// stays there while row tiles of A stream past. Every k-block reads and writes C once more:
// deep products (square ones, weight gradients over many rows) take blocks twice as deep in
// groups half as wide, half the passes over C (BENCHMARKS.md, "Matrix products", has the
// comparison); shallower products keep the shallow blocking.
struct Blocking {
  int64_t depth, group_columns;
};
constexpr int64_t kDeepProduct = 1024;
constexpr Blocking kShallow{256, 512}, kDeep{512, 256};
static_assert(kShallow.depth * kShallow.group_columns == kDeep.depth * kDeep.group_columns);

Blocking blocking_for(int64_t k) {
  return k >= kDeepProduct ? kDeep : kShallow;
}

// Rows of A per block (a multiple of kRows): a block's k-slice stays cached while every panel
// of the group passes over it. These three sizes were measured against 24 to 384 rows, 64 to
// 512 k-steps and groups of 512, 1024 or all columns (same-process comparisons with Eigen's
// GEMM, from K = 64 training shapes to 2048-square products).
constexpr int64_t kBlockRows = 48;
// Up to this many rows of A, panels of an untransposed B that are whole vectors wide are read in
// place instead of packed (gemm_group).
constexpr int64_t kInPlaceRows = 4 * kBlockRows;

using simd::kLanes;
using simd::kVectorBytes;
using simd::load;
using simd::load_partial;
using simd::store;
using simd::store_partial;
using simd::Vec;

// V vectors from row p (cols valid elements, the rest zero).
template <class T, int V>
void load_row(const T* p, int64_t cols, Vec<T>* out) {
  for (int v = 0; v < V; ++v) {
    const int64_t first = int64_t{v} * kLanes<T>;
    if (cols >= first + kLanes<T>) {
      out[v] = load<T>(p + first);
    } else {
      out[v] = cols > first ? load_partial<T>(p + first, cols - first) : Vec<T>{};
    }
  }
}

template <class T, int V>
void store_row(T* p, int64_t cols, const Vec<T>* in) {
  for (int v = 0; v < V; ++v) {
    const int64_t first = int64_t{v} * kLanes<T>;
    if (cols >= first + kLanes<T>) {
      store<T>(p + first, in[v]);
    } else if (cols > first) {
      store_partial<T>(p + first, in[v], cols - first);
    }
  }
}

// One register tile: Rows rows by cols (<= V vectors) of c over `depth` k-steps.
// a points at op(a)[first row, first k] in place: the next k-step is 1 element on (with
// TransposedA, a_stride elements), the next row a_stride elements on (with TransposedA, 1).
// b is a packed panel (depth steps of V vectors). C starts from its old values when load_c is
// set, plus bias if not null.
template <class T, int V, int Rows, bool TransposedA>
void tile(const T* a, int64_t a_stride, const T* b, int64_t b_stride, int64_t depth, T* c,
          int64_t ldc, int64_t cols, bool load_c, const T* bias) {
  // Every loop over the tile's rows has a constant trip count: so the accumulators stay in
  // registers instead of being zeroed and reloaded from the stack. Each row count is its own
  // tile: the short last tile of a block computed all of a full one's rows (reading its last
  // row again), a third of the work wasted on attention's 16-row blocks on AVX-512.
  Vec<T> bias_row[V];
  for (int v = 0; v < V; ++v) bias_row[v] = Vec<T>{};
  if (bias) load_row<T, V>(bias, cols, bias_row);
  Vec<T> acc[Rows][V];
  for (int r = 0; r < Rows; ++r) {
    for (int v = 0; v < V; ++v) acc[r][v] = bias_row[v];
    if (load_c) {
      Vec<T> old[V];
      load_row<T, V>(c + r * ldc, cols, old);
      for (int v = 0; v < V; ++v) acc[r][v] += old[v];
    }
  }
  // With no k-steps, a may be null and is not touched.
  const T* row[Rows];
  for (int r = 0; r < Rows; ++r) row[r] = depth > 0 ? a + r * (TransposedA ? 1 : a_stride) : a;
  // The tile's rows of C are written at the end: fetching them now lets that wait overlap the
  // products. In a training step C is often a buffer last touched long ago, so the fetch pays
  // there even though isolated products, with everything cached, gain nothing from it.
  for (int r = 0; r < Rows; ++r) {
    for (int v = 0; v < V; ++v) __builtin_prefetch(c + r * ldc + v * kLanes<T>, 1);
  }
  // Unrolled: loop overhead is visible next to 24 FMAs per step, most at small K.
#pragma GCC unroll 4
  for (int64_t p = 0; p < depth; ++p) {
    Vec<T> b_step[V];
    for (int v = 0; v < V; ++v) b_step[v] = load<T>(b + p * b_stride + v * kLanes<T>);
    for (int r = 0; r < Rows; ++r) {
      const T x = row[r][TransposedA ? p * a_stride : p];
      for (int v = 0; v < V; ++v) acc[r][v] += x * b_step[v];
    }
  }
  for (int r = 0; r < Rows; ++r) store_row<T, V>(c + r * ldc, cols, acc[r]);
}

template <class T>
using TileFn = void (*)(const T*, int64_t, const T*, int64_t, int64_t, T*, int64_t, int64_t, bool,
                        const T*);

// A panel narrower than kMaxVectors leaves accumulator registers free: its tall tile takes
// more rows, as many accumulators as the widest tile (fewer are too few chains to cover the
// multiply-add latency: 4 x 2 on AVX2, 6 x 2 on AVX-512, as attention's D = 32 products are).
constexpr int tall_rows(int vectors) {
  return kRows * kMaxVectors / vectors;
}

// The tile of `vectors` vectors by `rows` rows: tall_rows(vectors), or 1 to kRows.
template <class T, bool TransposedA, int V, int R = kRows>
TileFn<T> pick_short_tile(int rows) {
  if (rows == R) return &tile<T, V, R, TransposedA>;
  if constexpr (R > 1) return pick_short_tile<T, TransposedA, V, R - 1>(rows);
  return nullptr;
}

template <class T, bool TransposedA, int V = kMaxVectors>
TileFn<T> pick_tile(int vectors, int rows) {
  if (vectors == V) {
    return rows == tall_rows(V) ? &tile<T, V, tall_rows(V), TransposedA>
                                : pick_short_tile<T, TransposedA, V>(rows);
  }
  if constexpr (V > 1) return pick_tile<T, TransposedA, V - 1>(vectors, rows);
  return nullptr;
}

// op(b)[k0 : k0 + depth, j0 : j0 + cols] as depth steps of `vectors` vectors, zero-padded:
// a transposed B, or the last, narrower panel of an untransposed one.
template <class T>
void pack_panel(MatrixRef<T> b, int64_t k0, int64_t depth, int64_t j0, int64_t cols, int vectors,
                T* panel) {
  const int64_t width = int64_t{vectors} * kLanes<T>;
  if (b.transposed) {
    // Column j of the panel is row j0 + j of the stored matrix.
    simd::transpose<T>(b.data + j0 * b.stride + k0, b.stride, cols, depth, panel, width);
  } else {
    for (int64_t p = 0; p < depth; ++p)
      std::copy_n(b.data + (k0 + p) * b.stride + j0, cols, panel + p * width);
  }
  // The padding is less than a vector per k-step: a loop, not a library call per step.
  if (cols < width) {
    for (int64_t p = 0; p < depth; ++p) {
      for (int64_t j = cols; j < width; ++j) panel[p * width + j] = T(0);
    }
  }
}

// Rows [row_begin, row_end) of c, columns [0, n) (at most one group). Per k-block, B is packed
// once into panels; then each block of kBlockRows rows of A (read in place, and cached after
// the first panel) meets every panel. When there are few rows, a panel of an untransposed B whose
// width is whole vectors is read in place: it is already rows of whole vectors, and copying it (all
// of X, for a weight gradient) cost more than contiguity saved. With many rows the packed copy
// wins: rows of a wide B (a 1024-float stride) collide in the same cache sets.
template <class T>
void gemm_group(int64_t row_begin, int64_t row_end, int64_t n, int64_t k, MatrixRef<T> a,
                MatrixRef<T> b, T* c, int64_t ldc, bool accumulate, const T* bias) {
  constexpr int64_t width = int64_t{kMaxVectors} * kLanes<T>;
  // The columns' vectors spread evenly over the panels: with 3-vector AVX2 panels, 128 columns
  // are panels of 3, 3, 3, 3, 2 and 2 vectors instead of five of 3 and one of 1, whose tile has
  // too few accumulators to hide the multiply-add latency.
  const int64_t vectors = (n + kLanes<T> - 1) / kLanes<T>;
  const int64_t panels = (vectors + kMaxVectors - 1) / kMaxVectors;
  const int64_t narrow_vectors = vectors / panels, wide_panels = vectors % panels;
  thread_local std::vector<T> buffer;
  const int64_t block_depth = blocking_for(k).depth;
  T* const packed_b = simd::aligned_scratch(buffer, panels * block_depth * width);
  // k == 0 still runs one (empty) block, which writes bias or zeros.
  for (int64_t k0 = 0; k0 == 0 || k0 < k; k0 += block_depth) {
    const int64_t depth = std::min(block_depth, k - k0);
    const bool first = k0 == 0;
    struct Panel {
      int64_t j0, cols;
      int vectors;
      bool in_place;
      const T* data;
      int64_t stride;  // between k-steps
    };
    auto panel_at = [&](int64_t panel) {
      const int64_t panel_vectors = narrow_vectors + (panel < wide_panels ? 1 : 0);
      const int64_t j0 = kLanes<T> * (panel * narrow_vectors + std::min(panel, wide_panels));
      const int64_t panel_width = panel_vectors * kLanes<T>, cols = std::min(panel_width, n - j0);
      const int v = static_cast<int>(panel_vectors);
      if (depth > 0 && !b.transposed && cols % kLanes<T> == 0 &&
          row_end - row_begin <= kInPlaceRows)
        return Panel{j0, cols, v, true, b.data + k0 * b.stride + j0, b.stride};
      return Panel{j0, cols, v, false, packed_b + panel * block_depth * width, panel_width};
    };
    for (int64_t panel = 0; panel < panels; ++panel) {
      const Panel p = panel_at(panel);
      if (depth > 0 && !p.in_place)
        pack_panel<T>(b, k0, depth, p.j0, p.cols, p.vectors,
                      packed_b + panel * block_depth * width);
    }
    for (int64_t i0 = row_begin; i0 < row_end; i0 += kBlockRows) {
      const int64_t block_end = std::min(row_end, i0 + kBlockRows);
      for (int64_t panel = 0; panel < panels; ++panel) {
        const Panel p = panel_at(panel);
        // Tall tiles while a whole one fits, then kRows-row ones, then one of the rows left.
        const int64_t tall_height = tall_rows(p.vectors);
        const T* block_bias = first && bias ? bias + p.j0 : nullptr;
        for (int64_t i = i0; i < block_end;) {
          const int64_t left = block_end - i;
          const int64_t tile_rows = left >= tall_height ? tall_height : std::min(kRows, left);
          const TileFn<T> fn = a.transposed
                                   ? pick_tile<T, true>(p.vectors, static_cast<int>(tile_rows))
                                   : pick_tile<T, false>(p.vectors, static_cast<int>(tile_rows));
          const T* a_tile = depth == 0     ? a.data
                            : a.transposed ? a.data + k0 * a.stride + i
                                           : a.data + i * a.stride + k0;
          fn(a_tile, a.stride, p.data, p.stride, depth, c + i * ldc + p.j0, ldc, p.cols,
             !first || accumulate, block_bias);
          i += tile_rows;
        }
      }
    }
  }
}

// Rows [row_begin, row_end) of c, every column, one group of columns at a time.
template <class T>
void gemm_rows(int64_t row_begin, int64_t row_end, int64_t n, int64_t k, MatrixRef<T> a,
               MatrixRef<T> b, T* c, int64_t ldc, bool accumulate, const T* bias) {
  const int64_t group_columns = blocking_for(k).group_columns;
  for (int64_t j0 = 0; j0 < n; j0 += group_columns) {
    MatrixRef<T> group_b = b;
    if (k > 0) group_b.data += b.transposed ? j0 * b.stride : j0;
    gemm_group(row_begin, row_end, std::min(group_columns, n - j0), k, a, group_b, c + j0, ldc,
               accumulate, bias ? bias + j0 : nullptr);
  }
}

}  // namespace

template <class T>
void gemm(int64_t m, int64_t n, int64_t k, MatrixRef<T> a, MatrixRef<T> b, T* c, int64_t ldc,
          bool accumulate, const T* bias, bool parallel) {
  if (m == 0 || n == 0) return;
  const int64_t row_tiles = (m + kRows - 1) / kRows;
  const int threads =
      parallel ? static_cast<int>(std::min<int64_t>(omp_get_max_threads(), row_tiles)) : 1;
  if (threads <= 1) return gemm_rows(0, m, n, k, a, b, c, ldc, accumulate, bias);
#pragma omp parallel num_threads(threads)
  {
    // Whole row tiles per thread, so only the last tile of all may be short.
    const int t = omp_get_thread_num(), count = omp_get_num_threads();
    const int64_t begin = std::min(m, row_tiles * t / count * kRows);
    const int64_t end = std::min(m, row_tiles * (t + 1) / count * kRows);
    if (begin < end) gemm_rows(begin, end, n, k, a, b, c, ldc, accumulate, bias);
  }
}

GRADLAB_GEMM_KERNELS(GRADLAB_INSTANTIATE_KERNEL)

}  // namespace gradlab::kernels
