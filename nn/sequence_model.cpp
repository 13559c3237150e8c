// The loss every SequenceModel shares, and the factory: the one place that knows the kinds.
#include "nn/sequence_model.h"

#include <algorithm>
#include <functional>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/softmax.h"
#include "nn/models.h"

namespace gradlab::nn {
namespace {

struct ModelKind {
  std::string name;
  std::function<std::shared_ptr<SequenceModel>(const ModelConfig&)> make;
  std::function<int64_t(int64_t prompt_length, int64_t answer_length)> positions;
  // Positions for windows of running text (a language model); empty if the kind cannot read them.
  std::function<int64_t(int64_t context)> window_positions;
};

const std::vector<ModelKind>& kinds() {
  static const std::vector<ModelKind> table{
      // Reads prompt, separator and answer as one sequence; one position is spare because the
      // table is sized for whole samples.
      {"decoder", [](const ModelConfig& c) { return std::make_shared<DecoderLM>(c); },
       [](int64_t prompt, int64_t answer) { return prompt + 1 + answer; },
       [](int64_t context) { return context; }},
      // The encoder reads the prompt; the decoder reads the separator and the answer.
      {"seq2seq", [](const ModelConfig& c) { return std::make_shared<EncoderDecoder>(c); },
       [](int64_t prompt, int64_t answer) { return std::max(prompt, answer); }, nullptr},
  };
  return table;
}

const ModelKind& kind_named(const std::string& name) {
  for (const ModelKind& kind : kinds()) {
    if (kind.name == name) return kind;
  }
  std::string known;
  for (const ModelKind& kind : kinds()) known += (known.empty() ? "" : " or ") + kind.name;
  throw ConfigError("unknown model " + quote(name) + " (expected " + known + ")");
}

}  // namespace

Tensor SequenceModel::loss(const SequenceBatch& batch) const {
  return cross_entropy(forward(batch), batch.targets, kIgnoreTarget);
}

Tensor SequenceModel::forward_incremental(const Indices&, GenerationCache&) const {
  throw ConfigError("this model reads a prompt and an answer; it cannot generate running text");
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
  return kind_named(kind).positions(prompt_length, answer_length);
}

int64_t positions_for_windows(const std::string& kind, int64_t context) {
  const ModelKind& model = kind_named(kind);
  if (!model.window_positions) {
    throw ConfigError("a " + kind +
                      " model reads a prompt and an answer, not running text (use decoder)");
  }
  return model.window_positions(context);
}

std::shared_ptr<SequenceModel> make_sequence_model(const std::string& kind,
                                                   const ModelConfig& config) {
  return kind_named(kind).make(config);
}

}  // namespace gradlab::nn
