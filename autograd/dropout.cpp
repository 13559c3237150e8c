// Inverted dropout with an explicit generator, so a run is reproducible from its seed.
#include "autograd/dropout.h"

#include <string>

#include "autograd/elementwise.h"
#include "autograd/error.h"

namespace gradlab {

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  if (!(p >= 0.0 && p < 1.0)) {
    throw ConfigError("dropout: probability " + std::to_string(p) + " is outside [0, 1)");
  }
  if (!training || p == 0.0) return x;
  // The scaled keep-mask is a constant, so mul's backward gives g * mask.
  Tensor mask = Tensor::empty(x.shape(), x.dtype());
  const double scale = 1.0 / (1.0 - p);
  dispatch(x.dtype(), [&]<class T>() {
    T* m = mask.mutable_data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) m[i] = gen.uniform() < p ? T(0) : T(scale);
  });
  return x * mask;
}

}  // namespace gradlab
