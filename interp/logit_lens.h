// The logit lens: what a model would predict if its residual stream stopped after each block.
// Each layer's residual is read through the model's own unembedding (final LayerNorm, then the
// head), so that the last layer's reading is the model's logits and earlier ones show how the
// prediction forms across depth. docs/hooks.md shows it on a trained model.
#pragma once

#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "nn/sequence_model.h"

namespace gradlab::interp {

struct LensLayer {
  // "embed" for the residual entering the first block (blocks.0.hook_resid_pre), then
  // "blocks.<i>" for the residual leaving block i (its hook_resid_post); "decoder.<i>" for the
  // encoder-decoder, whose lens reads the decoder stack.
  std::string name;
  Tensor logits;  // [B, T, V]
};

// The lens of model on batch: num_layers + 1 readings, in depth order, the last equal to
// model.forward(batch) bit for bit. One forward pass (run_with_cache of the residual points, in
// the model's current mode: use EvalScope for no dropout), then SequenceModel::unembed of each
// residual, without a graph. Throws ConfigError for a model with no such points or no unembed.
std::vector<LensLayer> logit_lens(const nn::SequenceModel& model, const nn::SequenceBatch& batch);

// The lens of one sequence as probabilities (softmax over V of each layer's logits), what
// `gradlab lens` prints and writes: L + 1 layers, T positions, the top_k tokens of each.
struct LensProbabilities {
  std::vector<std::string> layers;         // [L + 1]: LensLayer::name
  int64_t positions = 0;                   // T
  int64_t top_k = 0;                       // K
  std::vector<double> target_probability;  // [L + 1, T]: p(target); NaN where none counts
  std::vector<int64_t> top_tokens;         // [L + 1, T, K]: most likely first (ties: lower id)
  std::vector<double> top_probabilities;   // [L + 1, T, K]
};

// lens [L + 1] of logits [1, T, V] against targets [1, T] (kIgnoreTarget where none). Throws
// ShapeError for a batch of several sequences or other shapes, ConfigError for top_k outside
// [1, V].
LensProbabilities lens_probabilities(const std::vector<LensLayer>& lens, const Indices& targets,
                                     int64_t top_k);

// The mean of p(target) per layer over the sequences of a data set, at every position or at one
// position per sequence (its answer's), summed batch by batch so that a data set streams.
struct LensMean {
  std::vector<std::string> layers;         // [L + 1]
  int64_t positions = 0;                   // P: T, or 1 at the answer
  std::vector<double> target_probability;  // [L + 1, P]: NaN where no sequence has a target
  int64_t rows = 0;
};

class LensReduction {
 public:
  // lens [L + 1] of logits [R, T, V] against targets [R, T]; at [R] each row's one position, or
  // empty for every position (then every batch has the first one's T). Throws ShapeError for
  // shapes that do not match.
  void add(const std::vector<LensLayer>& lens, const Indices& targets,
           const std::vector<int64_t>& at);
  // Throws ConfigError when no row was added.
  LensMean mean() const;

 private:
  LensMean sums_;                // target_probability holds the sums
  std::vector<int64_t> counts_;  // [P]: the rows with a target there
};

}  // namespace gradlab::interp
