// ALiBi's bias, built once per call as a constant [H, Tq, Tk] that broadcasts over the batch.
#include "nn/score_modifier.h"

#include <cmath>
#include <cstdlib>

#include "autograd/error.h"
#include "autograd/ops.h"

namespace gradlab::nn {

AlibiBias::AlibiBias(int64_t num_heads) {
  if (num_heads <= 0) {
    throw ConfigError("AlibiBias: num_heads must be positive, got " + std::to_string(num_heads));
  }
  for (int64_t h = 1; h <= num_heads; ++h) {
    slopes_.push_back(std::exp2(-8.0 * static_cast<double>(h) / static_cast<double>(num_heads)));
  }
}

Tensor AlibiBias::forward(const Tensor& scores, int64_t query_first) const {
  const int64_t H = static_cast<int64_t>(slopes_.size());
  if (scores.rank() != 4 || scores.size(1) != H) {
    throw ShapeError("AlibiBias: scores " + to_string(scores.shape()) +
                     " are not [B, H, Tq, Tk] with H = " + std::to_string(H));
  }
  const int64_t Tq = scores.size(2), Tk = scores.size(3);
  Tensor bias = Tensor::empty({H, Tq, Tk}, DType::Float64);
  double* b = bias.mutable_data<double>();
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t i = 0; i < Tq; ++i) {
      for (int64_t j = 0; j < Tk; ++j) {
        b[(h * Tq + i) * Tk + j] = -slopes_[h] * static_cast<double>(std::abs(query_first + i - j));
      }
    }
  }
  return scores + bias.to(scores.dtype());  // [B, H, Tq, Tk]
}

}  // namespace gradlab::nn
