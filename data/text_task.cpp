// The text task and its data: windows of a file's tokens for training and validation.
#include "data/text_task.h"

#include <stdexcept>

#include "autograd/error.h"
#include "autograd/format.h"
#include "data/task_rows.h"

namespace gradlab::data {

TextData::TextData(std::shared_ptr<const TextCorpus> corpus,
                   std::shared_ptr<const nn::SequenceModel> model, uint64_t seed,
                   int64_t batch_size, int64_t context, Heldout heldout, int64_t count)
    : corpus_(std::move(corpus)),
      model_(std::move(model)),
      seed_(seed),
      batch_size_(batch_size),
      context_(context),
      heldout_(heldout),
      count_(count) {
  if (heldout_ != Heldout::WholeFile) corpus_->require_windows(context_);
}

nn::SequenceBatch TextData::training_batch(int64_t step) const {
  return model_->make_batch(corpus_->training_windows(seed_, step, batch_size_, context_), 0);
}

nn::SequenceBatch TextData::heldout() const {
  switch (heldout_) {
    case Heldout::Windows:
      return model_->make_batch(corpus_->validation_windows(seed_, count_, context_), 0);
    case Heldout::ValidationSplit:
      return model_->make_batch(corpus_->validation_all(context_), 0);
    case Heldout::WholeFile:
      return model_->make_batch(corpus_->all_windows(context_), 0);
  }
  throw std::logic_error("TextData: unknown held-out set");
}

std::shared_ptr<const TextCorpus> load_text_corpus(TextOptions& options) {
  if (options.data.empty()) throw ConfigError("a language model needs --data FILE");
  if (options.context < 1 || options.context > (1 << 20)) {
    throw ConfigError("--context must be in [1, 2^20], got " + format_number(options.context));
  }
  std::shared_ptr<const TextCorpus> corpus;
  if (options.vocabulary.empty() && tokenizer_named(options.tokenizer) == Tokenizer::Char) {
    // The char tokenizer's vocabulary is the file's own characters.
    corpus = std::make_shared<TextCorpus>(options.data, options.tokenizer, options.val_fraction);
    options.vocabulary = corpus->vocabulary().serialize();
  } else {
    corpus = std::make_shared<TextCorpus>(
        options.data, Vocabulary::deserialize(options.tokenizer, options.vocabulary),
        options.val_fraction);
  }
  corpus->require_windows(options.context);
  return corpus;
}

namespace {

void check(bool ok, const std::string& message) {
  if (!ok) throw ConfigError(message);
}

// The vocabulary options name, if it is known without reading the file: stored (a checkpoint,
// or after prepare()), or the byte tokenizer's fixed one. Errors name --tokenizer, or the stored
// vocabulary ("char vocabulary: ...").
std::optional<Vocabulary> known_vocabulary(const TextOptions& options) {
  Tokenizer tokenizer;
  try {
    tokenizer = tokenizer_named(options.tokenizer);
  } catch (const ConfigError& e) {
    throw ConfigError(std::string("--tokenizer: ") + e.what());
  }
  if (options.vocabulary.empty() && tokenizer == Tokenizer::Char) return std::nullopt;
  return Vocabulary::deserialize(tokenizer, options.vocabulary);
}

}  // namespace

TextTask::TextTask(std::string name, const TextOptions& options,
                   std::shared_ptr<const TextCorpus> corpus)
    : LanguageModelTask(std::move(name)), options_(options), corpus_(std::move(corpus)) {
  const TextOptions& o = options_;
  check(!o.data.empty(), "--task " + this->name() + " needs --data FILE");
  check(o.context > 0 && o.context <= (1 << 20),
        "--context must be in [1, 2^20], got " + format_number(o.context));
  check(o.val_fraction > 0 && o.val_fraction < 1,
        "--val-fraction must be in (0, 1), got " + format_number(o.val_fraction));
  check(o.eval_iters > 0, "--eval-iters must be positive, got " + format_number(o.eval_iters));
  vocabulary_ = corpus_ ? std::optional(corpus_->vocabulary()) : known_vocabulary(o);
}

const Vocabulary& TextTask::vocabulary() const {
  if (!vocabulary_) {
    throw ConfigError("--tokenizer: the vocabulary is not known before the file is read");
  }
  return *vocabulary_;
}

int64_t TextTask::positions(const std::string& model_kind) const {
  return nn::positions_for_windows(model_kind, options_.context);
}

std::string TextTask::length_flag() const {
  return "--context " + format_number(options_.context);
}

std::string TextTask::vocabulary_flag() const {
  return "the text's vocabulary of " + format_number(vocab_size());
}

HeldoutSize TextTask::heldout_size(int64_t, int64_t) const {
  return {options_.eval_iters, options_.context + 1,
          "--eval-iters " + format_number(options_.eval_iters), "[windows, T] validation windows"};
}

void TextTask::prepare(TaskConfig& config) {
  corpus_ = load_text_corpus(config.text);
  options_ = config.text;
  vocabulary_ = corpus_->vocabulary();
}

std::shared_ptr<const DataSource> TextTask::data_source(
    std::shared_ptr<const nn::SequenceModel> model, uint64_t seed, int64_t batch_size,
    int64_t) const {
  std::shared_ptr<const TextCorpus> corpus = corpus_;
  if (!corpus) {
    TextOptions with_vocabulary = options_;
    corpus = load_text_corpus(with_vocabulary);
  }
  return std::make_shared<TextData>(
      std::move(corpus), std::move(model), seed, batch_size, options_.context,
      options_.eval_full ? TextData::Heldout::ValidationSplit : TextData::Heldout::Windows,
      options_.eval_iters);
}

std::string TextTask::token_unit() const {
  return tokenizer_kind(vocabulary().kind()).unit;
}

std::string TextTask::heldout_description() const {
  return options_.data + " (validation split)";
}

std::shared_ptr<const DataSource> TextTask::file_source(
    const std::string& path, std::shared_ptr<const nn::SequenceModel> model, uint64_t seed,
    int64_t batch_size) const {
  const auto corpus = std::make_shared<TextCorpus>(path, vocabulary(), options_.val_fraction);
  return std::make_shared<TextData>(corpus, std::move(model), seed, batch_size, options_.context,
                                    TextData::Heldout::WholeFile, 0);
}

std::shared_ptr<Task> make_text_task(const TaskConfig& config) {
  return std::make_shared<TextTask>(config.name, config.text);
}

std::vector<ConfigField> text_task_fields(TaskConfig& c) {
  TextOptions& t = c.text;
  return {
      {"data", &t.data, "--task text: the text file to model", true, true},
      {"tokenizer", &t.tokenizer, "--task text: char (Unicode characters) or byte (any file)", true,
       true},
      {"context", &t.context, "--task text and mqar: tokens the model reads at once", true, true},
      {"val-fraction", &t.val_fraction, "--task text: the end of the file held out", true, true},
      {"eval-iters", &t.eval_iters, "--task text: validation windows per evaluation", true, true},
      {"eval-full", &t.eval_full, "--task text: evaluate on the whole validation split", true,
       true},
      // Derived from the file, and may hold characters a config file cannot (newlines).
      {"vocabulary", &t.vocabulary, "the char tokenizer's symbols", true, false, false},
  };
}

}  // namespace gradlab::data
