// A sparse autoencoder (interp/sae.h) on a trained model: the rows it reads from a hook point,
// the check that it fits the model, training on activations streamed from the model's batches,
// its metrics over held-out sequences (with the CE loss score) and each feature's top-activating
// examples and logit effect.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "interp/sae.h"
#include "interp/sae_training.h"
#include "nn/sequence_model.h"

namespace gradlab::interp {

// The activation [B, T, C] at point on batch (a forward pass that stops after it, no graph) as
// the SAE's rows [B * T, C]. Throws ConfigError for a point the model lacks (naming the closest)
// or one that is not [B, T, C].
Tensor sae_inputs(const nn::SequenceModel& model, const nn::SequenceBatch& batch,
                  const std::string& point);

// Throws ConfigError "<what>: ..." unless sae was trained on this model (its parameters'
// fingerprint) and its d_in is the width of its hook point (of batch's first sequence).
void check_sae_fits(const nn::SequenceModel& model, const Sae& sae, const nn::SequenceBatch& batch,
                    const std::string& what);

// What an SAE does over a set of sequences: the metrics of its rows, and the model's loss
// (cross-entropy over the counted targets) clean, with the point zero-ablated and with the SAE's
// reconstruction spliced in.
struct SaeEvaluation {
  int64_t inputs = 0;  // rows read: sequences x positions
  SaeBatchMetrics metrics;
  double ce_clean = 0, ce_zero = 0, ce_sae = 0;
  // (ce_zero - ce_sae) / (ce_zero - ce_clean): 1 when the splice loses nothing, 0 when it is as
  // bad as zero (NaN when ablating the point costs nothing).
  double ce_score = 0;
  int64_t dead = 0;  // features active on none of the rows
};

// Over set's sequences, rows_per_pass at a time, in the model's current mode.
SaeEvaluation evaluate_sae(const nn::SequenceModel& model, const Sae& sae,
                           const nn::SequenceBatch& set, int64_t rows_per_pass);

// The CSV an SAE's training writes, its header and a row per logged step: the step's batch
// metrics, dead features, the features resampled, and the held-out evaluation.
extern const char* const kSaeLogHeader;
void write_sae_log_row(std::ostream& out, const SaeStepLog& step, const SaeEvaluation& heldout);

// Trains sae on the activations at its hook point of training_batch(s) [B, T] (all B x T
// positions one step's rows), with a log row (evaluate_sae over heldout) on `log` every
// log_every steps; report, when given, receives each row as it is written.
void train_sae_on_model(const nn::SequenceModel& model, Sae& sae,
                        const std::function<nn::SequenceBatch(int64_t step)>& training_batch,
                        const nn::SequenceBatch& heldout, int64_t rows_per_pass,
                        const SaeOptimizer& optimizer, const SaeTrainingOptions& options,
                        std::ostream& log,
                        const std::function<void(const SaeStepLog&, const SaeEvaluation&)>& report);

// A row of a set where a feature fires.
struct FeatureExample {
  int64_t sequence = 0, position = 0;
  double activation = 0;
};

struct FeatureSummary {
  int64_t feature = 0;
  double frequency = 0;             // fraction of the rows it is active on
  std::vector<FeatureExample> top;  // largest activation first
  // The decoder row read through the unembedding (the final norm's weight folded in, as
  // TransformerLens's W_U): the tokens whose logits it raises most, (token, logit) largest first;
  // empty when the point is not the residual stream's width.
  std::vector<std::pair<int64_t, double>> logit_effect;
};

// Every feature's summary over set's sequences, with its top_examples examples and top_tokens
// tokens, features ordered by frequency (most frequent first; dead ones last).
std::vector<FeatureSummary> sae_features(const nn::SequenceModel& model, const Sae& sae,
                                         const nn::SequenceBatch& set, int64_t rows_per_pass,
                                         int64_t top_examples, int64_t top_tokens);

}  // namespace gradlab::interp
