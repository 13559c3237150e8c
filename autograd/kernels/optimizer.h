// The optimizers' element loops (train/optimizer.cpp keeps the bookkeeping: steps, bias
// corrections, which tensors decay): one parameter tensor of n elements updated in place from
// its gradient, here so that they run in the processor's variant (variants.h) like the other
// kernels. Internal to gradlab's libraries.
#pragma once

#include <cstdint>

namespace gradlab::kernels {

// SGD: d = g + weight_decay p; with a momentum buffer b: b = momentum b + d, then
// p += neg_lr (d + momentum b) (Nesterov) or p += neg_lr b; without one: p += neg_lr d.
template <class T>
struct SgdStep {
  T neg_lr, weight_decay, momentum;
  bool nesterov;
};

template <class T>
void sgd_update(T* p, const T* g, T* momentum_buffer, int64_t n, const SgdStep<T>& step);

// Adam and AdamW: p *= shrink (AdamW's decoupled decay; 1 for none); gi = g + l2 p;
// m = beta1 m + (1 - beta1) gi; v = beta2 v + (1 - beta2) gi^2;
// p += neg_step_size m / (sqrt(v) / bias_correction2_sqrt + eps).
template <class T>
struct AdamStep {
  T beta1, beta2, one_minus_beta1, one_minus_beta2;  // the differences rounded from double
  T l2, shrink, bias_correction2_sqrt, eps, neg_step_size;
};

template <class T>
void adam_update(T* p, const T* g, T* m, T* v, int64_t n, const AdamStep<T>& step);

}  // namespace gradlab::kernels
