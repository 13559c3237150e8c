// Several Linear layers applied to one input as a single product, their outputs side by side:
// what self-attention does with W_Q, W_K and W_V (one GEMM forward and one backward instead of
// three each). The layers keep their own parameters, under their own names in checkpoints; the
// stacked weight and bias are a copy, kept between calls and made again only after one of the
// layers' parameters has been written.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "nn/layers.h"

namespace gradlab::nn {

class StackedLinear {
 public:
  // Throws ConfigError unless the layers share in_features and all or none of them has a bias.
  explicit StackedLinear(std::vector<std::shared_ptr<Linear>> layers);

  // x [..., in] -> [..., out_1 + out_2 + ...]: the first layer's outputs, then the second's...
  // Exactly linear(x, concat(weights, 0), concat(biases, 0)), gradients included: each layer's
  // parameters get their rows of the stacked ones' gradients.
  Tensor forward(const Tensor& x) const;

 private:
  // The layers' weights (and biases) concatenated along the output axis, and the versions of
  // the parameters they were made from.
  struct Stacked {
    Tensor weight, bias;  // [out_1 + out_2 + ..., in], [out_1 + out_2 + ...]
    std::vector<uint64_t> versions;
  };
  Stacked current() const;

  std::vector<std::shared_ptr<Linear>> layers_;
  mutable std::mutex mutex_;  // forward is const and may run on several threads at once
  mutable Stacked stacked_;
};

}  // namespace gradlab::nn
