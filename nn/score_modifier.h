// Attention score modifiers: what a self-attention layer does to its scores [B, H, Tq, Tk]
// before the masks and the softmax, such as ALiBi's linear bias per head. The models build the
// one their config names from the registry (nn/module_registry.h), one per self-attention layer.
#pragma once

#include <vector>

#include "nn/module.h"

namespace gradlab::nn {

class ScoreModifier : public Module {
 public:
  // scores [B, H, Tq, Tk], already scaled by 1/sqrt(D), of the queries at positions
  // [query_first, query_first + Tq) against the keys at positions [0, Tk) -> [B, H, Tq, Tk].
  // query_first is 0 but in generation, where the new queries follow the cached keys.
  virtual Tensor forward(const Tensor& scores, int64_t query_first) const = 0;
};

// ALiBi (Press et al. 2022): head h (1..H) adds -m_h |i - j| to the score of query position i
// against key position j, with the geometric slopes m_h = 2^(-8h / H) for every H (the paper's
// code interleaves other slopes when H is not a power of two; this does not). In causal
// attention, where j <= i, that is the paper's -m_h (i - j); the absolute value makes an
// encoder's keys on either side fall off alike. No parameters.
class AlibiBias : public ScoreModifier {
 public:
  // Throws ConfigError unless num_heads is positive.
  explicit AlibiBias(int64_t num_heads);
  // Throws ShapeError naming the shape unless scores are [B, H, Tq, Tk] with H = num_heads.
  Tensor forward(const Tensor& scores, int64_t query_first) const override;
  const std::vector<double>& slopes() const { return slopes_; }  // m_1 .. m_H

 private:
  std::vector<double> slopes_;
};

}  // namespace gradlab::nn
