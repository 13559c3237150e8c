#include "autograd/kernels/optimizer.h"

#include <cmath>

#include "autograd/kernels/kernel_list.h"

namespace gradlab::kernels {

template <class T>
void sgd_update(T* p, const T* g, T* momentum_buffer, int64_t n, const SgdStep<T>& step) {
  const T neg_lr = step.neg_lr, wd = step.weight_decay, momentum = step.momentum;
  T* buf = momentum_buffer;
  if (buf == nullptr) {
    for (int64_t i = 0; i < n; ++i) p[i] += neg_lr * (g[i] + wd * p[i]);
  } else if (step.nesterov) {
    for (int64_t i = 0; i < n; ++i) {
      const T d = g[i] + wd * p[i];
      buf[i] = buf[i] * momentum + d;
      p[i] += neg_lr * (d + momentum * buf[i]);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const T d = g[i] + wd * p[i];
      buf[i] = buf[i] * momentum + d;
      p[i] += neg_lr * buf[i];
    }
  }
}

template <class T>
void adam_update(T* p, const T* g, T* m, T* v, int64_t n, const AdamStep<T>& step) {
  const T beta1 = step.beta1, beta2 = step.beta2, one_minus_beta1 = step.one_minus_beta1,
          one_minus_beta2 = step.one_minus_beta2, l2 = step.l2, shrink = step.shrink,
          bc2_sqrt = step.bias_correction2_sqrt, eps = step.eps, neg_step_size = step.neg_step_size;
  if (shrink != 1) {
    for (int64_t i = 0; i < n; ++i) p[i] *= shrink;
  }
  for (int64_t i = 0; i < n; ++i) {
    const T gi = g[i] + l2 * p[i];
    m[i] = m[i] * beta1 + one_minus_beta1 * gi;
    v[i] = v[i] * beta2 + one_minus_beta2 * gi * gi;
    const T denom = std::sqrt(v[i]) / bc2_sqrt + eps;
    p[i] += neg_step_size * m[i] / denom;
  }
}

GRADLAB_OPTIMIZER_KERNELS(GRADLAB_INSTANTIATE_KERNEL)

}  // namespace gradlab::kernels
