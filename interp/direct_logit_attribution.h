// Direct logit attribution: the residual stream that reaches the final norm split into what each
// part of the model wrote to it (embeddings, each head, each output bias, each feed-forward), and
// each part's share of a logit through the final norm, its scale frozen from the run
// (TransformerLens's rule), and the unembedding. The parts sum to the model's logits exactly (to
// rounding). docs/commands.md ("dla") and docs/python.md (the cache helpers) show it in use.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "nn/sequence_model.h"

namespace gradlab::interp {

// A cached activation by point name: an nn::ActivationCache's, or one Python holds. Throws (the
// reader's own error) for a point that is not cached.
using PointReader = std::function<Tensor(const std::string& name)>;

// Parts of a residual stream, stacked: their sum is the residual.
struct ResidualStack {
  std::vector<std::string> labels;  // [N]
  Tensor stack;                     // [N, B, T, C]
};

// How finely decompose_residual splits the stream.
enum class ResidualGrain {
  // "embed", "pos_embed", then per block "<l>_attn_out", "<l>_cross_attn_out" (encoder-decoder)
  // and "<l>_mlp_out": TransformerLens's decompose_resid.
  Sublayers,
  // "embed", "pos_embed", then per block each head "L<l>H<h>", the attention's output bias
  // "<l>_attn_bias", the cross-attention's heads "L<l>H<h>_cross" and "<l>_cross_attn_bias",
  // and "<l>_mlp_out": the parts of direct logit attribution.
  Heads,
};

struct DecomposeOptions {
  int64_t layer = -1;  // the stream entering block `layer`; -1: the final norm's input
  ResidualGrain grain = ResidualGrain::Heads;
  bool attention = true;   // the attention parts (mode "all" or "attn")
  bool mlp = true;         // the feed-forward parts (mode "all" or "mlp")
  bool embeddings = true;  // "embed" and "pos_embed" (a sinusoidal encoding is a part too)
  bool biases = true;      // at ResidualGrain::Heads, the attention output biases
};

// The residual stream's blocks: "blocks.<i>", or "decoder.<i>" for the encoder-decoder (whose
// decoder's stream reaches the head). Throws ConfigError for a model of one's own.
std::vector<std::string> residual_blocks(const nn::SequenceModel& model);

// The point holding the residual stream entering block `layer` (hook_resid_pre), or for layer -1
// or L the final norm's input (the last block's hook_resid_post). Throws ConfigError for a layer
// outside [-1, L].
std::string residual_point(const nn::SequenceModel& model, int64_t layer);

// The points decompose_residual(model, ..., options) reads, for run_with_cache.
std::vector<std::string> decomposition_points(const nn::SequenceModel& model,
                                              const DecomposeOptions& options);

// The residual stream at options.layer as the sum of its parts, read from cached points (the
// model's own output biases added as parts of their own at ResidualGrain::Heads). Throws
// ConfigError for a post-norm model with norms (each block's norm rescales the stream, which is
// then no sum of parts) or a model of one's own, and what read throws for a missing point.
ResidualStack decompose_residual(const nn::SequenceModel& model, const PointReader& read,
                                 const DecomposeOptions& options = {});

// stack [..., B, T, C] (any leading axes; the trailing axes those of residual) through the norm
// before block `layer` (its ln1), or for layer -1 or L the final norm, as a linear map: each part
// centred (LayerNorm; RMSNorm does not centre) and divided by the norm's scale computed on the
// whole residual [B, T, C] (frozen), then multiplied by the norm's weight unless fold_ln (which
// leaves the weight to unembedding(model, true)). The norm's bias is not added: see
// normalized_parts. Identity for a model without that norm. Throws ConfigError for a norm that is
// neither LayerNorm nor RMSNorm, ShapeError for shapes that do not match.
Tensor apply_frozen_norm(const nn::SequenceModel& model, const Tensor& stack,
                         const Tensor& residual, int64_t layer, bool fold_ln = false);

// parts through apply_frozen_norm, and the norm's bias as a part of its own ("ln_final_bias", or
// "<l>_ln1_bias") when it has one and fold_ln is off: the parts then sum to the norm's output.
ResidualStack normalized_parts(const nn::SequenceModel& model, const ResidualStack& parts,
                               const Tensor& residual, int64_t layer, bool fold_ln = false);

// The map from the final norm's output to logits, logits = h weight + bias.
struct Unembedding {
  Tensor weight;  // [C, V]: W_U (the head's weight transposed, or the tied token embedding)
  Tensor bias;    // [V]: b_U; undefined for a head without one (and with tied embeddings)
};

// The model's unembedding; with fold_ln, TransformerLens's convention: the final LayerNorm's
// weight folded into W_U (rows scaled) and its bias into b_U (b_U + b_ln W_U).
Unembedding unembedding(const nn::SequenceModel& model, bool fold_ln = false);

// What the command line and the tests ask of one run of the model.
struct DlaOptions {
  int64_t position = -1;  // the position read; -1: each row's answer position (its first target)
  int64_t answer = -1;    // the token; -1: each row's target at the position
  int64_t versus = -1;    // another token whose logit is subtracted; -1: none
  bool fold_ln = false;
};

// Each part's share of one logit (or logit difference) per row of a batch.
struct DlaRows {
  // The parts of ResidualGrain::Heads, then "ln_final_bias" (a final LayerNorm with a bias,
  // unless fold_ln) and "unembed_bias" (a head with a bias): [N].
  std::vector<std::string> labels;
  std::vector<double> contributions;        // [R, N]: they sum to logits
  std::vector<double> logits;               // [R]: the model's logit, or logit difference
  std::vector<int64_t> positions, answers;  // [R]
};

// Direct logit attribution of model (in its current mode) on batch, one forward pass without a
// graph. Throws as decompose_residual, and ConfigError for a position or token out of range, or
// a row with no target where one is needed (no --answer, or position -1).
DlaRows direct_logit_attribution(const nn::SequenceModel& model, const nn::SequenceBatch& batch,
                                 const DlaOptions& options);

// Mean and standard deviation per part over the rows of a data set.
struct DlaSummary {
  std::vector<std::string> labels;  // [N]
  std::vector<double> mean, std;    // [N]: std with divisor R (0 for one row)
  double logit_mean = 0;            // of DlaRows::logits
  int64_t rows = 0;
};

// The running mean and spread per part of DlaRows added batch by batch (Welford's sums), so that
// a data set streams: nothing holds more than one batch's rows.
class DlaReduction {
 public:
  void add(const DlaRows& rows);
  // Throws ConfigError when no row was added.
  DlaSummary summary() const;

 private:
  DlaSummary sums_;         // mean and rows so far
  std::vector<double> m2_;  // [N]: squared deviations
  double logit_sum_ = 0;
};

// direct_logit_attribution over the first `rows` rows of batch (all of them for -1), in batches
// of batch_size rows (streamed: one batch's activations alive at a time), reduced per part.
// Throws as direct_logit_attribution, and ConfigError for rows outside [1, B].
DlaSummary summarize_dla(const nn::SequenceModel& model, const nn::SequenceBatch& batch,
                         const DlaOptions& options, int64_t rows = -1, int64_t batch_size = 32);

}  // namespace gradlab::interp
