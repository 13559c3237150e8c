// SequenceModel: the one interface of gradlab's whole models, the decoder-only language model
// and the encoder-decoder, so that training, evaluation, decoding and attention export never
// ask which kind they hold. A task sample is "prompt, separator, answer"; each model lays it
// out as its inputs and targets in its own way (`make_batch`). A model of one's own that reads
// like a language model implements forward() alone: the rest has decoder-only defaults.
// `make_sequence_model` is the one place that knows the built-in kinds.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "autograd/indices.h"
#include "autograd/random.h"
#include "nn/attention.h"
#include "nn/initialisation.h"
#include "nn/layers.h"
#include "nn/model_options.h"
#include "nn/module.h"

namespace gradlab::nn {

// Targets with this value are left out of the loss (cross_entropy's default ignore index).
constexpr int64_t kIgnoreTarget = -100;

// What a model reads and what it must predict, teacher forced.
struct SequenceBatch {
  Indices source;   // [B, S]: the encoder's input; empty for the decoder-only model
  Indices inputs;   // [B, T]: what the decoder reads
  Indices targets;  // [B, T]: the next token at every input position, or kIgnoreTarget
  // [B, ...]: the real-valued input of a model that reads no tokens (tms: [B, I, n]), whose
  // own loss() scores it; undefined for a token model. Its initializer lets a token batch be
  // written {source, inputs, targets}.
  Tensor features{};
};

// B: the rows of batch.features, or else of batch.targets.
int64_t rows_in(const SequenceBatch& batch);

// Rows [begin, begin + count) of every array of a batch (an empty array stays empty): the chunks
// an evaluation, a process's share or a streamed data set runs.
SequenceBatch rows_of(const SequenceBatch& batch, int64_t begin, int64_t count);

// Attention weights of every layer, each [B, H, Tq, Tk], in layer order.
struct AttentionMaps {
  std::vector<Tensor> encoder_self;   // encoder-decoder only
  std::vector<Tensor> decoder_self;   // the decoder-only model's blocks, or the decoder's
  std::vector<Tensor> decoder_cross;  // encoder-decoder only: decoder queries, encoder keys
};

// What a model generating running text has read so far: each block's keys and values.
struct GenerationCache {
  std::vector<KVCache> blocks;
  int64_t length = 0;  // tokens read
};

class SequenceModel : public Module {
 public:
  explicit SequenceModel(const ModelConfig& config)
      : dropout_gen(std::make_shared<Generator>(config.seed + 1)), config_(config) {}

  // samples [B, P + 1 + A] (prompt of P tokens, separator, answer) copied into the batch this
  // model reads: its inputs, and the targets to predict. By default the decoder-only layout
  // (decoder_batch); a model that reads samples another way (the encoder-decoder) overrides it.
  virtual SequenceBatch make_batch(const Indices& samples, int64_t prompt_length) const;
  // Logits [B, T, V] for batch.inputs (and batch.source); fills maps when given.
  virtual Tensor forward(const SequenceBatch& batch, AttentionMaps* maps = nullptr) const = 0;
  // The residual stream [B, T, C] (of the decoder, for the encoder-decoder) read through the
  // final LayerNorm (if the model has one) and the output head: logits [B, T, V], as forward()
  // computes them from the last block's output, and the logit lens from any block's
  // (interp/logit_lens.h). LayerNorm normalizes residual with its own statistics. Throws
  // ConfigError by default: a model of one's own says how its residual stream becomes logits by
  // overriding this.
  virtual Tensor unembed(const Tensor& residual) const;
  // The mean cross-entropy of forward(batch) over the targets that count; a model that reads
  // batch.features instead says what it minimises. A model may compute it without the work whose
  // result cannot reach it (DecoderLM: the last block at positions that carry no loss), equal up
  // to rounding.
  virtual Tensor loss(const SequenceBatch& batch) const;
  // The answer_length tokens that follow prompt and separator, each the most likely token
  // given the ones before (ties go to the lowest token id). Runs in evaluation mode, and leaves
  // the model in training mode. By default for a decoder-only model: one forward() per answer
  // token, of inputs [1, T] = prompt, separator and the answer so far (no source, every target
  // kIgnoreTarget), read at the last position. A model that reads a source overrides it.
  virtual std::vector<int64_t> greedy_decode(const std::vector<int64_t>& prompt, int64_t separator,
                                             int64_t answer_length);

  // Generation of running text: logits [B, Tn, V] of tokens [B, Tn] that follow the
  // cache.length tokens read before; the cache then holds them too. Equal to forward() on the
  // whole sequence at those positions. Throws ConfigError for a model that cannot read running
  // text (the encoder-decoder), ShapeError past its positions.
  virtual Tensor forward_incremental(const Indices& tokens, GenerationCache& cache) const;

  const ModelConfig& config() const { return config_; }
  // The row of model_kinds() make_sequence_model built this model from, or empty for a model
  // of one's own (or one constructed directly): a built-in kind can be rebuilt from its kind
  // and config() alone, which is what a program's checkpoint records of it.
  const std::string& kind() const { return kind_; }
  std::shared_ptr<Generator> dropout_gen;  // the one generator behind every dropout mask

 private:
  friend std::shared_ptr<SequenceModel> make_sequence_model(const std::string& kind,
                                                            const ModelConfig& config);
  ModelConfig config_;
  std::string kind_;
};

// The mean cross-entropy of logits [B, T, V] against batch.targets, over the targets that count:
// SequenceModel::loss, for logits computed another way (with hooks).
Tensor sequence_loss(const Tensor& logits, const SequenceBatch& batch);

// The first position t of targets [B, T] at which some row's target counts (is not kIgnoreTarget),
// or T when none does: positions before it carry no loss in any row.
int64_t first_counted_position(const Indices& targets);

// The position of the largest logit in the last row of logits [1, T, V] (the first one on a
// tie): one step of a greedy decode.
int64_t most_likely_last_token(const Tensor& logits);

// The decoder-only layout: inputs are the sample without its last token, targets the sample
// shifted by one, kIgnoreTarget up to the separator (only the answer is predicted).
SequenceBatch decoder_batch(const Indices& samples, int64_t prompt_length);
// The encoder-decoder layout: source is the prompt, inputs the separator and the answer without
// its last token, targets the answer.
SequenceBatch encoder_decoder_batch(const Indices& samples, int64_t prompt_length);

// Model kinds, as the `--model` flag names them: "decoder" (decoder-only), "seq2seq"
// (encoder-decoder) and "tms" (the toy model of superposition, nn/toy_model.h).
const std::vector<std::string>& model_kinds();
// "decoder (decoder-only), seq2seq (encoder-decoder) or ...": the kinds and what each is, for
// --model's help.
std::string model_kinds_described();
// Positions the kind's position table needs for samples of these lengths. Throws ConfigError
// for an unknown kind.
int64_t positions_needed(const std::string& kind, int64_t prompt_length, int64_t answer_length);
// Positions the kind needs to read feature vectors of `instances` instances (batch.features
// [B, I, n]). Throws ConfigError for a kind that reads tokens, or an unknown kind.
int64_t positions_for_features(const std::string& kind, int64_t instances);
// Positions the kind needs to read windows of running text, context tokens at a time (samples
// with no prompt: make_batch(windows [B, context + 1], 0)). Throws ConfigError for a kind that
// cannot read running text, or an unknown kind.
int64_t positions_for_windows(const std::string& kind, int64_t context);
// What a model of the kind holds, counted from config without building it (so that sizes the
// machine cannot hold are refused before anything is allocated). Doubles: the factors may be
// any size a user typed.
struct ModelFootprint {
  double parameters = 0;
  // Floats one sequence of config.max_len positions keeps for the backward pass (activations,
  // attention weights, logits), about: the exact count depends on the ops' fusions.
  double activations_per_sequence = 0;
  // Floats alive at once for one sequence in a forward pass without a graph (one block's).
  double inference_per_sequence = 0;
  // The most keys for which an attention of the model keeps [B, H, Tq, Tk] weights in training
  // (nn::longest_keys_with_weights): longer sequences take the tiled kernel, linear in T.
  int64_t longest_keys_with_weights = 0;
};
ModelFootprint model_footprint(const std::string& kind, const ModelConfig& config);

// A new model of the kind, initialised from config.seed; its kind() is `kind`. Throws ConfigError
// for an unknown kind.
std::shared_ptr<SequenceModel> make_sequence_model(const std::string& kind,
                                                   const ModelConfig& config);

}  // namespace gradlab::nn
