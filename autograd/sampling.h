// Random tensors drawn from an explicit Generator (random.h), so that a run's draws follow from
// its seed: Bernoulli draws with per-element probabilities, and uniform and normal tensors
// shaped like another. Tensor::uniform and Tensor::randn draw tensors of a given shape. The
// results are constants (no graph); the values depend only on the generator's state and are
// drawn in row-major order, one generator call per element.
#pragma once

#include "autograd/random.h"
#include "autograd/tensor.h"

namespace gradlab {

// 1 with probability p, else 0, for each element p of probabilities (any shape, in [0, 1]);
// the result has probabilities' shape and dtype. Throws ConfigError naming the first value
// outside [0, 1].
Tensor bernoulli(const Tensor& probabilities, Generator& gen);
// Uniform in [low, high), like's shape and dtype.
Tensor rand_like(const Tensor& like, Generator& gen, double low = 0.0, double high = 1.0);
// Normal with mean and standard deviation stddev, like's shape and dtype.
Tensor randn_like(const Tensor& like, Generator& gen, double mean = 0.0, double stddev = 1.0);

}  // namespace gradlab
