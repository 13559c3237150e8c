// The toy model of superposition (Elhage et al. 2022, set up as ARENA's exercises): I instances
// trained at once, each squeezing n features into m dimensions and reading them back,
// h = W x, x' = ReLU(W^T h + b). Its sizes are ModelConfig's: vocab_size is n and max_len is I
// (what the tms task reports as its vocabulary and positions), d_model is m. Also here: the
// geometry of the features the pictures show, computed once from W.
#pragma once

#include <vector>

#include "nn/sequence_model.h"

namespace gradlab::nn {

class ToyModel : public SequenceModel {
 public:
  explicit ToyModel(const ModelConfig& config);

  // features [B, I, n] -> reconstruction [B, I, n].
  Tensor reconstruct(const Tensor& features) const;
  // reconstruct(batch.features); maps stay empty (there is no attention).
  Tensor forward(const SequenceBatch& batch, AttentionMaps* maps = nullptr) const override;
  // The importance-weighted squared error, summed over features, averaged over the batch and
  // summed over instances (the paper's loss; ARENA's is the same averaged over features too,
  // 1/n of it: the same minima, and Adam's steps barely differ).
  Tensor loss(const SequenceBatch& batch) const override;
  // [n]: feature i's importance 0.9^i, in the parameters' dtype.
  Tensor importance() const;

  Tensor weight;  // W [I, m, n]: column i of instance j is feature i's direction
  Tensor bias;    // b [I, n]
};

// What the pictures of a trained toy model show, per instance and feature ([I, n], row-major).
struct FeatureGeometry {
  int64_t instances = 0, features = 0, dims = 0;
  std::vector<double> norms;  // ||W_i||
  // D_i = ||W_i||^2 / sum_j (W_i_hat . W_j)^2: 1 for a feature with a dimension of its own, 1/2
  // for one of an antipodal pair, 2/5 in a pentagon; 0 for a feature not represented.
  std::vector<double> dimensionality;
  // With m = 2: the direction of W_i in degrees, in [0, 360) from the first axis; else empty.
  std::vector<double> angles;
};

// The geometry of weight W [I, m, n] (any dtype). Throws ShapeError unless it is rank 3.
FeatureGeometry feature_geometry(const Tensor& weight);

}  // namespace gradlab::nn
