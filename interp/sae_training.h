// Training a sparse autoencoder (interp/sae.h) on a stream of activations, as SAELens does: Adam
// (lr 3e-4, betas (0, 0.999): SAELens's defaults), the decoder's parallel gradient removed before
// and its rows scaled to unit norm after each step; features that fired on no input over the last
// dead_window steps counted dead and, every resample_every steps, re-initialised toward the
// inputs the SAE reconstructs worst (Bricken et al.'s resampling, simplified: see train_sae).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "interp/sae.h"
#include "nn/module.h"

namespace gradlab::interp {

struct SaeTrainingOptions {
  int64_t steps = 1000;
  double lr = 3e-4;
  int64_t log_every = 100;     // a metrics row every this many steps, and at the last
  int64_t dead_window = 1000;  // SAELens's dead_feature_window
  int64_t resample_every = 0;  // 0: no resampling
};

// The optimizer a training steps: train::make_optimizer's Adam over sae.named_parameters(), made
// by the caller (interp reads no training code). state() lists its live slots, named
// "<parameter>/<slot>", which resampling zeroes for the features it re-initialises.
struct SaeOptimizer {
  std::function<void(double lr)> step;
  std::function<std::vector<nn::NamedTensor>()> state;
};

// What one batch of activations says of the SAE.
struct SaeBatchMetrics {
  double loss = 0, mse = 0, l1 = 0;
  double l0 = 0;                  // mean number of active features per input
  double explained_variance = 0;  // 1 - sum |x - x_hat|^2 / sum |x - mean x|^2 (means over N)
};

// The metrics of a pass (no graph needed) over inputs x [N, C].
SaeBatchMetrics batch_metrics(const SaeOutput& out, const Tensor& x);

struct SaeStepLog {
  int64_t step = 0;
  SaeBatchMetrics batch;  // of the step's own batch, before its update
  int64_t dead = 0;       // features that fired on no input over the last dead_window steps
  int64_t resampled = 0;  // features re-initialised at this step
};

// Trains sae for options.steps steps, step s on activations(s) [N, C] (s = 1, 2, ...); calls log
// every options.log_every steps and at the last. Resampling, at each multiple of resample_every
// before the last step: each dead feature, in order, takes the next of the step's inputs sorted
// by squared reconstruction error (largest first, cycling): its decoder row becomes that input
// minus b_dec, at unit norm, its encoder column the same direction scaled to 0.2 of the mean norm
// of the live features' encoder columns, its b_enc 0, and its optimizer state 0.
void train_sae(Sae& sae, const std::function<Tensor(int64_t step)>& activations,
               const SaeOptimizer& optimizer, const SaeTrainingOptions& options,
               const std::function<void(const SaeStepLog&)>& log);

}  // namespace gradlab::interp
