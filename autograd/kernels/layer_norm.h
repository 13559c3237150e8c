// Layer normalisation over the last axis, forward and backward, as llm.c pairs them: the forward
// keeps each row's mean and 1/std, and the backward recomputes the normalised input from them.
// Shapes: x, y, g, dx [N, C] (N rows of C channels); weight, bias and their gradients [C];
// mean, rstd [N].
#pragma once

#include <cstdint>

namespace gradlab::kernels {

// y = (x - mean) * rstd * weight + bias per row, rstd = 1 / sqrt(var + eps) with the biased
// variance. A null weight means ones, a null bias zeros.
template <class T>
void layer_norm_forward(const T* x, const T* weight, const T* bias, T eps, int64_t rows,
                        int64_t channels, T* y, T* mean, T* rstd);

// dx from g = dL/dy, and, when not null, dweight and dbias (sums over the rows, in an order that
// does not depend on the thread count). A null weight means ones.
template <class T>
void layer_norm_backward(const T* x, const T* g, const T* weight, const T* mean, const T* rstd,
                         int64_t rows, int64_t channels, T* dx, T* dweight, T* dbias);

}  // namespace gradlab::kernels
