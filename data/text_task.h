// The text task: a language model on a file of the user's, read as windows of context + 1
// tokens, every next token predicted (the model's make_batch with no prompt). Its options are
// data::TextOptions; its data sources are TextData.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "data/data_source.h"
#include "data/task.h"
#include "data/text.h"

namespace gradlab::data {

// A text file as a language model reads it.
class TextData : public DataSource {
 public:
  enum class Heldout {
    Windows,          // `count` windows of the validation split at fixed random offsets
    ValidationSplit,  // the whole validation split, in consecutive windows
    WholeFile,        // every token of the file, in consecutive windows
  };
  TextData(std::shared_ptr<const TextCorpus> corpus, std::shared_ptr<const nn::SequenceModel> model,
           uint64_t seed, int64_t batch_size, int64_t context, Heldout heldout, int64_t count);
  nn::SequenceBatch training_batch(int64_t step) const override;
  nn::SequenceBatch heldout() const override;

 private:
  std::shared_ptr<const TextCorpus> corpus_;
  std::shared_ptr<const nn::SequenceModel> model_;
  uint64_t seed_;
  int64_t batch_size_, context_;
  Heldout heldout_;
  int64_t count_;
};

// Reads options.data: with the vocabulary of options (a resumed or loaded run), or else
// building it from the file and storing it in options.vocabulary. Throws ConfigError naming
// the file for a missing, empty or unreadable file, invalid UTF-8, a character outside the
// vocabulary, or a split shorter than context + 1 tokens.
std::shared_ptr<const TextCorpus> load_text_corpus(TextOptions& options);

// The text row's task (task_kinds()): also what a program builds for a corpus it has read.
class TextTask : public LanguageModelTask {
 public:
  // Throws ConfigError naming the flag: no --data, --context outside [1, 2^20], --val-fraction
  // outside (0, 1), --eval-iters below 1, an unknown --tokenizer.
  TextTask(std::string name, const TextOptions& options,
           std::shared_ptr<const TextCorpus> corpus = nullptr);

  // Throws ConfigError naming --tokenizer when the vocabulary is not known yet (prepare()).
  int64_t vocab_size() const override { return vocabulary().size(); }
  int64_t positions(const std::string& model_kind) const override;
  std::string length_flag() const override;
  std::string vocabulary_flag() const override;
  HeldoutSize heldout_size(int64_t eval_size, int64_t model_positions) const override;
  void prepare(TaskConfig& config) override;
  // Reads the file with the task's vocabulary unless prepare() or the constructor had it.
  std::shared_ptr<const DataSource> data_source(std::shared_ptr<const nn::SequenceModel> model,
                                                uint64_t seed, int64_t batch_size,
                                                int64_t eval_size) const override;

  const Vocabulary& vocabulary() const override;
  int64_t context() const override { return options_.context; }
  std::string_view token_bytes() const override {
    return corpus_ ? corpus_->token_bytes() : std::string_view();
  }
  std::string token_unit() const override;
  std::string heldout_description() const override;
  std::shared_ptr<const DataSource> file_source(const std::string& path,
                                                std::shared_ptr<const nn::SequenceModel> model,
                                                uint64_t seed, int64_t batch_size) const override;

 private:
  TextOptions options_;
  std::shared_ptr<const TextCorpus> corpus_;
  std::optional<Vocabulary> vocabulary_;
};

}  // namespace gradlab::data
