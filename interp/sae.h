// A sparse autoencoder (Bricken et al. 2023, as SAELens trains one) over one hook point's
// activations: f = ReLU((x - b_dec) W_enc + b_enc), x_hat = f W_dec + b_dec, one decoder row per
// feature kept at unit norm; optionally TopK (Gao et al. 2024): only each input's k largest
// pre-activations kept. The training loop is interp/sae_training.h, its file
// interp/files/sae_file.h.
#pragma once

#include <cstdint>
#include <string>

#include "autograd/tensor.h"
#include "nn/module.h"

namespace gradlab::interp {

struct SaeConfig {
  std::string hook = "";        // the hook point it reads: "blocks.0.hook_resid_post"
  int64_t d_in = 0;             // C: the point's last axis
  int64_t d_sae = 0;            // F: features
  double l1_coefficient = 1.0;  // SAELens's StandardTrainingSAEConfig default
  int64_t top_k = 0;            // 0: ReLU with the L1 penalty; k > 0: TopK, no L1 term in the loss
  uint64_t seed = 0;
  // The model it was trained on: its checkpoint's path (for messages) and the fingerprint of its
  // parameters (model_fingerprint), which a model it is applied to must match.
  std::string checkpoint = "";
  uint64_t model_fingerprint = 0;
};

// Throws ConfigError naming the field for d_in or d_sae below 1, a negative or non-finite
// l1_coefficient, or a top_k outside [0, d_sae].
void check_sae_config(const SaeConfig& config);

// One pass over inputs x [N, C].
struct SaeOutput {
  Tensor features;        // f [N, F]
  Tensor reconstruction;  // x_hat [N, C]
  Tensor mse;             // mean over N of sum over C of (x_hat - x)^2 (SAELens's)
  Tensor l1;              // mean over N of sum over F of f_i ||W_dec row i||
  Tensor loss;            // mse + l1_coefficient * l1 (mse alone for TopK)
};

class Sae : public nn::Module {
 public:
  // Decoder rows drawn from a normal distribution and scaled to unit norm, the encoder their
  // transpose, both biases zero (SAELens's init_encoder_as_decoder_transpose).
  explicit Sae(const SaeConfig& config);

  const SaeConfig& config() const { return config_; }
  Tensor encode(const Tensor& x) const;         // [N, C] -> f [N, F]
  Tensor decode(const Tensor& features) const;  // [N, F] -> x_hat [N, C]
  SaeOutput forward(const Tensor& x) const;
  // x [..., C] (any leading axes) -> x_hat of x's shape and dtype: what a splice puts back.
  Tensor reconstruct(const Tensor& x) const;

  // Scales every decoder row to unit norm (after each optimizer step).
  void normalize_decoder();
  // Removes from each decoder row's gradient its component along the row (before each step), so
  // that a step moves the row along the unit sphere.
  void remove_parallel_gradient();

  Tensor W_enc, b_enc, W_dec, b_dec;  // [C, F], [F], [F, C], [C]

 private:
  SaeConfig config_;
};

// A fingerprint of a model's parameters (names, shapes, values): what ties an SAE to the model
// it was trained on.
uint64_t model_fingerprint(const nn::Module& model);

}  // namespace gradlab::interp
