// Inverted dropout: in training, zeroes each element with probability p and scales the rest by
// 1 / (1 - p); in evaluation (or with p = 0) it returns x unchanged.
#pragma once

#include "autograd/random.h"
#include "autograd/tensor.h"

namespace gradlab {

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen);

}  // namespace gradlab
