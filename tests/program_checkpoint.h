// A program's own run for the tests of its checkpoints: a DataSource of the program's (echo
// three symbols after the separator 0), a model of one's own (Bigram), and two training steps
// of a Trainer on either, saved as a program saves them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/layers.h"
#include "train/trainer.h"

namespace gradlab::testing {

inline constexpr int64_t kVocabulary = 6, kPrompt = 3, kAnswer = 3;

// The program's own data: the prompt of three symbols, then the separator 0, then the prompt
// again, laid out by the model's make_batch.
class EchoData : public train::DataSource {
 public:
  explicit EchoData(std::shared_ptr<const nn::SequenceModel> model) : model_(std::move(model)) {}
  nn::SequenceBatch training_batch(int64_t step) const override { return draw(step, 4); }
  nn::SequenceBatch heldout() const override { return draw(-1, 4); }

 private:
  nn::SequenceBatch draw(int64_t stream, int64_t rows) const {
    Generator gen(static_cast<uint64_t>(stream) * 7919 + 3);
    std::vector<int64_t> values;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<int64_t> prompt;
      for (int64_t i = 0; i < kPrompt; ++i) prompt.push_back(gen.below(kVocabulary - 1) + 1);
      values.insert(values.end(), prompt.begin(), prompt.end());
      values.push_back(0);
      values.insert(values.end(), prompt.begin(), prompt.end());
    }
    return model_->make_batch(Indices({rows, kPrompt + 1 + kAnswer}, values), kPrompt);
  }
  std::shared_ptr<const nn::SequenceModel> model_;
};

inline nn::ModelConfig small_net(const std::string& kind) {
  nn::ModelConfig net;
  net.vocab_size = kVocabulary;
  net.max_len = nn::positions_needed(kind, kPrompt, kAnswer);
  net.d_model = 8;
  net.attention.num_heads = 2;
  net.num_layers = 1;
  net.feed_forward.d_ff = 12;
  net.init = nn::kGpt2Init;
  return net;
}

// Two steps of a program's run on model, saved to path; the given /config entries as options.
inline void train_and_save(const std::shared_ptr<nn::SequenceModel>& model, const std::string& path,
                           std::vector<train::ConfigEntry> given = {}) {
  train::TrainerOptions options;
  options.config = std::move(given);
  train::Trainer trainer(model, train::make_optimizer({}, model->named_parameters()),
                         std::make_shared<EchoData>(model), options);
  trainer.train_step();
  trainer.train_step();
  train::save_checkpoint(path, trainer.checkpoint());
}

// A model of a researcher's own: an embedding and a head, no attention.
class Bigram : public nn::SequenceModel {
 public:
  explicit Bigram(const nn::ModelConfig& config) : SequenceModel(config) {
    Generator gen(config.seed);
    embed = register_module(
        "embed", std::make_shared<nn::Embedding>(config.vocab_size, config.d_model, gen));
    head = register_module("head",
                           std::make_shared<nn::Linear>(config.d_model, config.vocab_size, gen));
  }
  Tensor forward(const nn::SequenceBatch& batch, nn::AttentionMaps* = nullptr) const override {
    return head->forward(embed->forward(batch.inputs));  // [B, T, V]
  }
  std::shared_ptr<nn::Embedding> embed;
  std::shared_ptr<nn::Linear> head;
};

}  // namespace gradlab::testing
