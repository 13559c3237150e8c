// What every SequenceModel has unless it says otherwise (the loss, and the decoder-only batch
// layout and greedy decode), and the factory: the one place that knows the built-in kinds.
#include "nn/sequence_model.h"

#include <algorithm>
#include <functional>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/graph.h"
#include "autograd/kinds.h"
#include "autograd/shape_ops.h"
#include "autograd/softmax.h"
#include "nn/attention.h"
#include "nn/models.h"
#include "nn/module_registry.h"
#include "nn/toy_model.h"

namespace gradlab::nn {
namespace {

// The parts of model_footprint both kinds share: per block and for the ends of the model.
// `causal`: whether every attention of the kind is causal (which decides where the tiled kernel
// takes over).
struct Sizes {
  double c, f, kv_width, heads, positions, vocab, layers, bias;
  double norm;        // parameters per channel of one normalisation: 0 with norm "none"
  double final_norm;  // the same for the final norms: 0 without them
  double positions_per_position, positions_fixed;  // the scheme's: fixed + per * max_len
  double modifier;                    // parameters of one self-attention layer's score modifier
  int64_t longest_keys_with_weights;  // see ModelFootprint
  Sizes(const ModelConfig& m, bool causal)
      : c(static_cast<double>(m.d_model)),
        f(static_cast<double>(m.feed_forward.d_ff)),
        kv_width(static_cast<double>(m.attention.num_kv_heads > 0 ? m.attention.num_kv_heads
                                                                  : m.attention.num_heads) *
                 static_cast<double>(m.d_model / std::max<int64_t>(m.attention.num_heads, 1))),
        heads(static_cast<double>(m.attention.num_heads)),
        positions(static_cast<double>(m.max_len)),
        vocab(static_cast<double>(m.vocab_size)),
        layers(static_cast<double>(m.num_layers)),
        bias(m.bias ? 1 : 0),
        norm(norm_parameters_per_channel(m)),
        final_norm(m.norm.final ? norm : 0),
        positions_per_position(positions_of(m, 2) - positions_of(m, 1)),
        positions_fixed(positions_of(m, 1) - positions_per_position),
        modifier(parameters_of(make_score_modifier(m, scratch()))),
        longest_keys_with_weights(nn::longest_keys_with_weights(m.max_len, causal, m.dropout)) {}
  // The norm's parameters over one channel (weight and bias, weight alone, or none), counted on
  // the module the kind makes.
  static double norm_parameters_per_channel(const ModelConfig& m) {
    const std::shared_ptr<Norm> one_channel = make_norm(1, m);
    return one_channel ? static_cast<double>(one_channel->num_parameters()) : 0;
  }
  static double parameters_of(const std::shared_ptr<Module>& module) {
    return module ? static_cast<double>(module->num_parameters()) : 0;
  }
  // The parameters of the config's positional scheme over `positions` positions. A scheme's
  // count is taken as a + b * max_len, from one and two positions: a table of max_len rows is
  // not built to be counted.
  static double positions_of(ModelConfig m, int64_t positions) {
    m.max_len = positions;
    return parameters_of(make_positions(m, scratch()));
  }
  static Generator& scratch() {
    thread_local Generator gen(0);
    return gen;
  }
  // One attention sublayer with its LayerNorm: Q and O are C x C, K and V C x KV*D.
  double attention_parameters() const {
    return 2 * c * c + 2 * c * kv_width + bias * (2 * c + 2 * kv_width) + norm * c;
  }
  // None in an attention-only block (F = 0). A registered feed-forward is counted as the mlp.
  double ffn_parameters() const { return f > 0 ? 2 * c * f + bias * (f + c) + norm * c : 0; }
  // Per position: normalised inputs, Q/K/V, the heads' output, projections, residual sums,
  // the feed-forward's two wide tensors and activation, and per head 3 rows of attention weights
  // where they are kept, or else the tiled kernel's log-sum-exp.
  double attention_activations() const {
    const bool weights_kept = static_cast<double>(longest_keys_with_weights) == positions;
    return 8 * c + (weights_kept ? 3 * heads * positions : heads);
  }
  double ffn_activations() const { return f > 0 ? 6 * c + 3 * f : 0; }
  // Embeddings, final LayerNorm and the head (logits, their softmax and gradient).
  double ends_parameters(const ModelConfig& m) const {
    return vocab * c + positions_fixed + positions * positions_per_position + final_norm * c +
           (m.embedding.tie_embeddings ? 0 : vocab * c + bias * vocab);
  }
  double ends_activations() const { return 4 * c + 3 * vocab; }
};

ModelFootprint decoder_footprint(const ModelConfig& m) {
  const Sizes s(m, /*causal=*/true);
  const double block = s.attention_activations() + s.ffn_activations();
  return {s.ends_parameters(m) +
              s.layers * (s.attention_parameters() + s.modifier + s.ffn_parameters()),
          s.positions * (s.ends_activations() + s.layers * block),
          s.positions * (s.ends_activations() + block), s.longest_keys_with_weights};
}

// An encoder and a decoder of `layers` blocks each; decoder blocks add cross-attention.
ModelFootprint encoder_decoder_footprint(const ModelConfig& m) {
  const Sizes s(m, /*causal=*/false);  // the encoder's and the cross-attention are not
  const double block = s.attention_parameters() + s.ffn_parameters();
  const double block_activations = s.attention_activations() + s.ffn_activations();
  return {s.ends_parameters(m) + s.final_norm * s.c +
              s.layers * (2 * block + 2 * s.modifier + s.attention_parameters()),
          s.positions * (s.ends_activations() + 4 * s.c +
                         s.layers * (2 * block_activations + s.attention_activations())),
          s.positions * (s.ends_activations() + 4 * s.c + 2 * block_activations),
          s.longest_keys_with_weights};
}

// W [I, m, n] and b [I, n]; per row of a batch, about the input, h, the output before and after
// the ReLU, and the error, with their gradients.
ModelFootprint toy_model_footprint(const ModelConfig& m) {
  const double instances = static_cast<double>(m.max_len), dims = static_cast<double>(m.d_model),
               features = static_cast<double>(m.vocab_size);
  return {instances * features * (dims + 1), 2 * instances * (dims + 4 * features),
          instances * (dims + 3 * features), 0};
}

struct ModelKind {
  std::string name;
  std::string summary;  // what the kind is, in --model's help
  std::function<std::shared_ptr<SequenceModel>(const ModelConfig&)> make;
  std::function<int64_t(int64_t prompt_length, int64_t answer_length)> positions;
  // Positions for windows of running text (a language model); empty if the kind cannot read them.
  std::function<int64_t(int64_t context)> window_positions;
  // Positions for feature vectors of I instances (a model that reads batch.features); empty if
  // the kind reads tokens. Such a kind has no `positions` of prompts and answers.
  std::function<int64_t(int64_t instances)> feature_positions;
  std::function<ModelFootprint(const ModelConfig&)> footprint;
};

const std::vector<ModelKind>& kinds() {
  static const std::vector<ModelKind> table{
      // Reads prompt, separator and answer as one sequence; one position is spare because the
      // table is sized for whole samples.
      {"decoder", "decoder-only",
       [](const ModelConfig& c) { return std::make_shared<DecoderLM>(c); },
       [](int64_t prompt, int64_t answer) { return prompt + 1 + answer; },
       [](int64_t context) { return context; }, nullptr, decoder_footprint},
      // The encoder reads the prompt; the decoder reads the separator and the answer.
      {"seq2seq", "encoder-decoder",
       [](const ModelConfig& c) { return std::make_shared<EncoderDecoder>(c); },
       [](int64_t prompt, int64_t answer) { return std::max(prompt, answer); }, nullptr, nullptr,
       encoder_decoder_footprint},
      // Reads [B, I, n] feature vectors: one position per instance.
      {"tms", "the toy model of superposition, for --task tms",
       [](const ModelConfig& c) { return std::make_shared<ToyModel>(c); }, nullptr, nullptr,
       [](int64_t instances) { return instances; }, toy_model_footprint},
  };
  return table;
}

const ModelKind& kind_named(const std::string& name) {
  return row_named(kinds(), name, "model");
}

// Rows [begin, begin + count) of a [B, ...] token array (an empty array stays empty).
Indices rows_of(const Indices& tokens, int64_t begin, int64_t count) {
  if (tokens.shape.empty()) return tokens;
  Shape shape = tokens.shape;
  const int64_t row = tokens.numel() / shape[0];
  shape[0] = count;
  return Indices(shape, std::vector<int64_t>(tokens.values.begin() + begin * row,
                                             tokens.values.begin() + (begin + count) * row));
}

// The refusal of a token task by a model that reads feature vectors.
ConfigError reads_features(const std::string& kind) {
  return ConfigError("a " + kind + " model reads feature vectors, not tokens (use --task tms)");
}

}  // namespace

int64_t rows_in(const SequenceBatch& batch) {
  return batch.features.defined() ? batch.features.size(0) : batch.targets.shape.at(0);
}

SequenceBatch rows_of(const SequenceBatch& batch, int64_t begin, int64_t count) {
  return {rows_of(batch.source, begin, count), rows_of(batch.inputs, begin, count),
          rows_of(batch.targets, begin, count),
          batch.features.defined() ? narrow(batch.features, 0, begin, count) : Tensor()};
}

Tensor sequence_loss(const Tensor& logits, const SequenceBatch& batch) {
  return cross_entropy(logits, batch.targets, kIgnoreTarget);
}

int64_t first_counted_position(const Indices& targets) {
  const int64_t rows = targets.shape.at(0), length = targets.shape.at(1);
  int64_t first = length;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t* row = targets.values.data() + r * length;
    for (int64_t t = 0; t < first; ++t) {
      if (row[t] != kIgnoreTarget) first = t;
    }
  }
  return first;
}

Tensor SequenceModel::loss(const SequenceBatch& batch) const {
  return sequence_loss(forward(batch), batch);
}

SequenceBatch SequenceModel::make_batch(const Indices& samples, int64_t prompt_length) const {
  return decoder_batch(samples, prompt_length);
}

std::vector<int64_t> SequenceModel::greedy_decode(const std::vector<int64_t>& prompt,
                                                  int64_t separator, int64_t answer_length) {
  NoGradGuard no_grad;
  EvalScope eval(*this);
  std::vector<int64_t> sequence = prompt;
  sequence.push_back(separator);
  for (int64_t i = 0; i < answer_length; ++i) {
    const int64_t length = static_cast<int64_t>(sequence.size());
    const SequenceBatch batch{
        {},
        Indices({1, length}, sequence),
        Indices({1, length}, std::vector<int64_t>(sequence.size(), kIgnoreTarget))};
    sequence.push_back(most_likely_last_token(forward(batch)));
  }
  return {sequence.end() - answer_length, sequence.end()};
}

int64_t most_likely_last_token(const Tensor& logits) {
  const Tensor row = logits.to(DType::Float32);
  const int64_t vocab = row.size(-1);
  const float* last = row.data<float>() + (row.numel() - vocab);
  int64_t best = 0;
  for (int64_t v = 1; v < vocab; ++v) {
    if (last[v] > last[best]) best = v;
  }
  return best;
}

Tensor SequenceModel::unembed(const Tensor&) const {
  throw ConfigError(
      "this model does not say how to read its residual stream as logits (override "
      "SequenceModel::unembed)");
}

Tensor SequenceModel::forward_incremental(const Indices&, GenerationCache&) const {
  throw ConfigError("this model reads a prompt and an answer; it cannot generate running text");
}

std::string model_kinds_described() {
  std::vector<std::string> described;
  for (const ModelKind& kind : kinds()) described.push_back(kind.name + " (" + kind.summary + ")");
  return name_list(described);
}

const std::vector<std::string>& model_kinds() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> list;
    for (const ModelKind& kind : kinds()) list.push_back(kind.name);
    return list;
  }();
  return names;
}

int64_t positions_needed(const std::string& kind, int64_t prompt_length, int64_t answer_length) {
  const ModelKind& model = kind_named(kind);
  if (!model.positions) throw reads_features(kind);
  return model.positions(prompt_length, answer_length);
}

int64_t positions_for_features(const std::string& kind, int64_t instances) {
  const ModelKind& model = kind_named(kind);
  if (!model.feature_positions) {
    throw ConfigError("a " + kind + " model reads tokens, not feature vectors (use --model tms)");
  }
  return model.feature_positions(instances);
}

int64_t positions_for_windows(const std::string& kind, int64_t context) {
  const ModelKind& model = kind_named(kind);
  if (model.feature_positions) throw reads_features(kind);
  if (!model.window_positions) {
    throw ConfigError("a " + kind +
                      " model reads a prompt and an answer, not running text (use decoder)");
  }
  return model.window_positions(context);
}

ModelFootprint model_footprint(const std::string& kind, const ModelConfig& config) {
  return kind_named(kind).footprint(config);
}

std::shared_ptr<SequenceModel> make_sequence_model(const std::string& kind,
                                                   const ModelConfig& config) {
  std::shared_ptr<SequenceModel> model = kind_named(kind).make(config);
  model->kind_ = kind;
  return model;
}

}  // namespace gradlab::nn
