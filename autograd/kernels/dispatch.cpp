// The kernels' entry points (declared in the kernel headers): each calls the variant of this
// process's instruction set (variants.h). Compiled once, outside the variants.
#include "autograd/kernels/variants.h"

extern "C" const gradlab::kernels::KernelVariant gradlab_kernels_baseline, gradlab_kernels_avx2,
    gradlab_kernels_avx512;

namespace gradlab::kernels {

const KernelVariant* kernel_variant(Isa isa) {
  if (isa > processor_isa()) return nullptr;
  switch (isa) {
    case Isa::avx512:
      return &gradlab_kernels_avx512;
    case Isa::avx2:
      return &gradlab_kernels_avx2;
    case Isa::baseline:
      break;
  }
  return &gradlab_kernels_baseline;
}

const KernelVariant& active_kernels() {
  static const KernelVariant& variant = *kernel_variant(kernel_isa());
  return variant;
}

namespace {

template <class T>
const KernelTable<T>& active() {
  return active_kernels().of<T>();
}

}  // namespace

template <class T>
void gemm(int64_t m, int64_t n, int64_t k, MatrixRef<T> a, MatrixRef<T> b, T* c, int64_t ldc,
          bool accumulate, const T* bias, bool parallel) {
  active<T>().gemm(m, n, k, a, b, c, ldc, accumulate, bias, parallel);
}

template <class T>
void attention_forward(const AttentionOperands<const T>& in, const AttentionDims& d,
                       const AttentionMask& mask, T scale, T* out, T* weights) {
  active<T>().attention_forward(in, d, mask, scale, out, weights);
}

template <class T>
void attention_backward(const T* g, const AttentionOperands<const T>& in, const T* weights,
                        const AttentionDims& d, bool causal, T scale,
                        const AttentionOperands<T>& grad) {
  active<T>().attention_backward(g, in, weights, d, causal, scale, grad);
}

template <class T>
bool attention_lanes_fit(const AttentionDims& d) {
  return active<T>().attention_lanes_fit(d);
}

template <class T>
int64_t attention_lanes_saved_size(const AttentionDims& d) {
  return active<T>().attention_lanes_saved_size(d);
}

template <class T>
void attention_lanes_forward(const AttentionOperands<const T>& in, const AttentionDims& d,
                             const AttentionMask& mask, T scale, T* out, T* weights, T* saved) {
  active<T>().attention_lanes_forward(in, d, mask, scale, out, weights, saved);
}

template <class T>
void attention_lanes_backward(const T* g, const T* saved, const AttentionDims& d, bool causal,
                              T scale, const AttentionOperands<T>& grad) {
  active<T>().attention_lanes_backward(g, saved, d, causal, scale, grad);
}

bool attention_tiles_fit(const AttentionDims& d, bool causal) {
  return active_kernels().attention_tiles_fit(d, causal);
}

template <class T>
void attention_tiles_forward(const AttentionOperands<const T>& in, const AttentionDims& d,
                             const AttentionMask& mask, T scale, T* out, T* lse,
                             const AttentionTiles& tiles) {
  active<T>().attention_tiles_forward(in, d, mask, scale, out, lse, tiles);
}

template <class T>
void attention_tiles_backward(const T* g, const AttentionOperands<const T>& in, const T* out,
                              const T* lse, const AttentionDims& d, const AttentionMask& mask,
                              T scale, const AttentionOperands<T>& grad,
                              const AttentionTiles& tiles) {
  active<T>().attention_tiles_backward(g, in, out, lse, d, mask, scale, grad, tiles);
}

template <class T>
void gelu_forward(const T* x, T* y, int64_t n) {
  active<T>().gelu_forward(x, y, n);
}

template <class T>
void gelu_backward(const T* x, const T* y, const T* g, T* dx, int64_t n) {
  active<T>().gelu_backward(x, y, g, dx, n);
}

template <class T>
void layer_norm_forward(const T* x, const T* weight, const T* bias, T eps, int64_t rows,
                        int64_t channels, T* y, T* mean, T* rstd) {
  active<T>().layer_norm_forward(x, weight, bias, eps, rows, channels, y, mean, rstd);
}

template <class T>
void layer_norm_backward(const T* x, const T* g, const T* weight, const T* mean, const T* rstd,
                         int64_t rows, int64_t channels, T* dx, T* dweight, T* dbias) {
  active<T>().layer_norm_backward(x, g, weight, mean, rstd, rows, channels, dx, dweight, dbias);
}

template <class T>
void softmax_rows_forward(const T* x, T* y, const SoftmaxRows& rows) {
  active<T>().softmax_rows_forward(x, y, rows);
}

template <class T>
void softmax_rows_backward(const T* y, const T* g, T* dx, const SoftmaxRows& rows) {
  active<T>().softmax_rows_backward(y, g, dx, rows);
}

template <class T>
void log_softmax_rows_forward(const T* x, T* y, const SoftmaxRows& rows) {
  active<T>().log_softmax_rows_forward(x, y, rows);
}

template <class T>
void log_softmax_rows_backward(const T* y, const T* g, T* dx, const SoftmaxRows& rows) {
  active<T>().log_softmax_rows_backward(y, g, dx, rows);
}

template <class T>
double cross_entropy_forward(const T* logits, const int64_t* targets, int64_t rows, int64_t classes,
                             int64_t ignore_index, T* log_probs) {
  return active<T>().cross_entropy_forward(logits, targets, rows, classes, ignore_index, log_probs);
}

template <class T>
void cross_entropy_backward(const T* log_probs, const int64_t* targets, int64_t rows,
                            int64_t classes, int64_t ignore_index, T factor, T* dx) {
  active<T>().cross_entropy_backward(log_probs, targets, rows, classes, ignore_index, factor, dx);
}

template <class T>
void sgd_update(T* p, const T* g, T* momentum_buffer, int64_t n, const SgdStep<T>& step) {
  active<T>().sgd_update(p, g, momentum_buffer, n, step);
}

template <class T>
void adam_update(T* p, const T* g, T* m, T* v, int64_t n, const AdamStep<T>& step) {
  active<T>().adam_update(p, g, m, v, n, step);
}

// Both element types of every entry point above.
#define GRADLAB_INSTANTIATE(name)             \
  template decltype(name<float>) name<float>; \
  template decltype(name<double>) name<double>;
GRADLAB_INSTANTIATE(gemm)
GRADLAB_INSTANTIATE(attention_forward)
GRADLAB_INSTANTIATE(attention_backward)
GRADLAB_INSTANTIATE(attention_lanes_fit)
GRADLAB_INSTANTIATE(attention_lanes_saved_size)
GRADLAB_INSTANTIATE(attention_lanes_forward)
GRADLAB_INSTANTIATE(attention_lanes_backward)
GRADLAB_INSTANTIATE(attention_tiles_forward)
GRADLAB_INSTANTIATE(attention_tiles_backward)
GRADLAB_INSTANTIATE(gelu_forward)
GRADLAB_INSTANTIATE(gelu_backward)
GRADLAB_INSTANTIATE(layer_norm_forward)
GRADLAB_INSTANTIATE(layer_norm_backward)
GRADLAB_INSTANTIATE(softmax_rows_forward)
GRADLAB_INSTANTIATE(softmax_rows_backward)
GRADLAB_INSTANTIATE(log_softmax_rows_forward)
GRADLAB_INSTANTIATE(log_softmax_rows_backward)
GRADLAB_INSTANTIATE(cross_entropy_forward)
GRADLAB_INSTANTIATE(cross_entropy_backward)
GRADLAB_INSTANTIATE(sgd_update)
GRADLAB_INSTANTIATE(adam_update)
#undef GRADLAB_INSTANTIATE

}  // namespace gradlab::kernels
