// Bernoulli draws and the _like forms of the Tensor factories' draws.
#include "autograd/sampling.h"

#include <cmath>

#include "autograd/error.h"
#include "autograd/format.h"

namespace gradlab {

Tensor bernoulli(const Tensor& probabilities, Generator& gen) {
  Tensor out = Tensor::empty(probabilities.shape(), probabilities.dtype());
  dispatch(probabilities.dtype(), [&]<class T>() {
    const T* p = probabilities.data<T>();
    T* o = out.mutable_data<T>();
    for (int64_t i = 0, n = out.numel(); i < n; ++i) {
      if (!(p[i] >= 0 && p[i] <= 1)) {
        throw ConfigError("bernoulli: probability " + format_number(static_cast<double>(p[i])) +
                          " at position " + std::to_string(i) + " of " +
                          to_string(probabilities.shape()) + " is outside [0, 1]");
      }
      // uniform() < 1 always, so p = 1 always draws 1 and p = 0 never does.
      o[i] = gen.uniform() < static_cast<double>(p[i]) ? T(1) : T(0);
    }
  });
  return out;
}

Tensor rand_like(const Tensor& like, Generator& gen, double low, double high) {
  return Tensor::uniform(like.shape(), gen, low, high, like.dtype());
}

Tensor randn_like(const Tensor& like, Generator& gen, double mean, double stddev) {
  return Tensor::randn(like.shape(), gen, like.dtype(), mean, stddev);
}

}  // namespace gradlab
