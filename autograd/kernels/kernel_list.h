// The one list of the kernels' entry points, a row per function, grouped by the file that defines
// them. From it variants.h builds each variant's table, dispatch.cpp the entry points that call
// through the table, and every kernel file and dispatch.cpp their float and double
// instantiations. The headers keep the declarations and their contracts.
#pragma once

#include "autograd/kernels/attention.h"
#include "autograd/kernels/attention_lanes.h"
#include "autograd/kernels/attention_tiles.h"
#include "autograd/kernels/gelu.h"
#include "autograd/kernels/gemm.h"
#include "autograd/kernels/layer_norm.h"
#include "autograd/kernels/optimizer.h"
#include "autograd/kernels/softmax.h"

// A row is X(result, name, (parameters), (arguments)): the function template
// `template <class T> result name(parameters)` of its header, T the element type (float or
// double), and its parameters' names again, for the call that forwards them. A row that does
// not match its header's declaration fails to compile in dispatch.cpp.
// clang-format off
#define GRADLAB_GEMM_KERNELS(X)                                                                    \
  X(void, gemm,                                                                                    \
    (int64_t m, int64_t n, int64_t k, MatrixRef<T> a, MatrixRef<T> b, T* c, int64_t ldc,           \
     bool accumulate, const T* bias, bool parallel),                                               \
    (m, n, k, a, b, c, ldc, accumulate, bias, parallel))

#define GRADLAB_ATTENTION_KERNELS(X)                                                               \
  X(void, attention_forward,                                                                       \
    (const AttentionOperands<const T>& in, const AttentionDims& d, const AttentionMask& mask,      \
     T scale, T* out, T* weights),                                                                 \
    (in, d, mask, scale, out, weights))                                                            \
  X(void, attention_backward,                                                                      \
    (const T* g, const AttentionOperands<const T>& in, const T* weights, const AttentionDims& d,   \
     bool causal, T scale, const AttentionOperands<T>& grad),                                      \
    (g, in, weights, d, causal, scale, grad))

#define GRADLAB_ATTENTION_LANES_KERNELS(X)                                                         \
  X(bool, attention_lanes_fit, (const AttentionDims& d), (d))                                      \
  X(int64_t, attention_lanes_saved_size, (const AttentionDims& d), (d))                            \
  X(void, attention_lanes_forward,                                                                 \
    (const AttentionOperands<const T>& in, const AttentionDims& d, const AttentionMask& mask,      \
     T scale, T* out, T* weights, T* saved),                                                       \
    (in, d, mask, scale, out, weights, saved))                                                     \
  X(void, attention_lanes_backward,                                                                \
    (const T* g, const T* saved, const AttentionDims& d, bool causal, T scale,                     \
     const AttentionOperands<T>& grad),                                                            \
    (g, saved, d, causal, scale, grad))

#define GRADLAB_ATTENTION_TILES_KERNELS(X)                                                         \
  X(void, attention_tiles_forward,                                                                 \
    (const AttentionOperands<const T>& in, const AttentionDims& d, const AttentionMask& mask,      \
     T scale, T* out, T* lse, const AttentionTiles& tiles),                                        \
    (in, d, mask, scale, out, lse, tiles))                                                         \
  X(void, attention_tiles_backward,                                                                \
    (const T* g, const AttentionOperands<const T>& in, const T* out, const T* lse,                 \
     const AttentionDims& d, const AttentionMask& mask, T scale, const AttentionOperands<T>& grad, \
     const AttentionTiles& tiles),                                                                 \
    (g, in, out, lse, d, mask, scale, grad, tiles))

#define GRADLAB_GELU_KERNELS(X)                                                                    \
  X(void, gelu_forward, (const T* x, T* y, int64_t n), (x, y, n))                                  \
  X(void, gelu_backward, (const T* x, const T* y, const T* g, T* dx, int64_t n), (x, y, g, dx, n))

#define GRADLAB_LAYER_NORM_KERNELS(X)                                                              \
  X(void, layer_norm_forward,                                                                      \
    (const T* x, const T* weight, const T* bias, T eps, int64_t rows, int64_t channels, T* y,      \
     T* mean, T* rstd),                                                                            \
    (x, weight, bias, eps, rows, channels, y, mean, rstd))                                         \
  X(void, layer_norm_backward,                                                                     \
    (const T* x, const T* g, const T* weight, const T* mean, const T* rstd, int64_t rows,          \
     int64_t channels, T* dx, T* dweight, T* dbias),                                               \
    (x, g, weight, mean, rstd, rows, channels, dx, dweight, dbias))

#define GRADLAB_SOFTMAX_KERNELS(X)                                                                 \
  X(void, softmax_rows_forward, (const T* x, T* y, const SoftmaxRows& rows), (x, y, rows))         \
  X(void, softmax_rows_backward, (const T* y, const T* g, T* dx, const SoftmaxRows& rows),         \
    (y, g, dx, rows))                                                                              \
  X(void, log_softmax_rows_forward, (const T* x, T* y, const SoftmaxRows& rows), (x, y, rows))     \
  X(void, log_softmax_rows_backward, (const T* y, const T* g, T* dx, const SoftmaxRows& rows),     \
    (y, g, dx, rows))                                                                              \
  X(double, cross_entropy_forward,                                                                 \
    (const T* logits, const int64_t* targets, int64_t rows, int64_t classes, int64_t ignore_index, \
     T* log_probs),                                                                                \
    (logits, targets, rows, classes, ignore_index, log_probs))                                     \
  X(void, cross_entropy_backward,                                                                  \
    (const T* log_probs, const int64_t* targets, int64_t rows, int64_t classes,                    \
     int64_t ignore_index, T factor, T* dx),                                                       \
    (log_probs, targets, rows, classes, ignore_index, factor, dx))

#define GRADLAB_OPTIMIZER_KERNELS(X)                                                               \
  X(void, sgd_update, (T* p, const T* g, T* momentum_buffer, int64_t n, const SgdStep<T>& step),   \
    (p, g, momentum_buffer, n, step))                                                              \
  X(void, adam_update, (T* p, const T* g, T* m, T* v, int64_t n, const AdamStep<T>& step),         \
    (p, g, m, v, n, step))

// Every kernel, a line per kernel file. A new kernel file adds its list above, its line here,
// and GRADLAB_<FILE>_KERNELS(GRADLAB_INSTANTIATE_KERNEL) after its definitions; the build
// refuses a variant that leaves an entry point undefined (cmake/link_kernel_variant.cmake).
#define GRADLAB_KERNELS(X)                                                                         \
  GRADLAB_GEMM_KERNELS(X)                                                                          \
  GRADLAB_ATTENTION_KERNELS(X)                                                                     \
  GRADLAB_ATTENTION_LANES_KERNELS(X)                                                               \
  GRADLAB_ATTENTION_TILES_KERNELS(X)                                                               \
  GRADLAB_GELU_KERNELS(X)                                                                          \
  GRADLAB_LAYER_NORM_KERNELS(X)                                                                    \
  GRADLAB_SOFTMAX_KERNELS(X)                                                                       \
  GRADLAB_OPTIMIZER_KERNELS(X)
// clang-format on

// Explicit instantiations for both element types of one row: a kernel file passes this to its
// own list (GRADLAB_GELU_KERNELS(GRADLAB_INSTANTIATE_KERNEL)), dispatch.cpp to the whole list.
#define GRADLAB_INSTANTIATE_KERNEL(result, name, parameters, arguments) \
  template decltype(name<float>) name<float>;                           \
  template decltype(name<double>) name<double>;
