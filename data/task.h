// A task: what a run learns, behind one interface. Each kind is one class in data/ and one row
// of the table in data/tasks.h (the sequence tasks copy, reverse, sort, recall, modular and
// induction; text, a language model on a file; tms, feature vectors for the toy model of
// superposition). The trainer, the checkpoint's /config and the
// command line ask the task; none of them compares a task's name.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "data/config_field.h"
#include "data/data_source.h"
#include "data/modular_options.h"
#include "data/mqar_options.h"
#include "data/program_data_options.h"
#include "data/sequence_task_options.h"
#include "data/text_options.h"
#include "data/tms_options.h"
#include "nn/sequence_model.h"

namespace gradlab::data {

class LanguageModelTask;
class SequenceTask;
class Vocabulary;

// A task's settings: its name and one options struct per task family, each passed whole to
// the tasks that read it (their factories in data/task_rows.h pick it out). A new option is its
// field in its family's struct, its row in that family's fields function (the flag, the /config
// attribute and the config-file key) and its use in the task. A checkpoint's /config holds only
// the fields of its own task (TaskKind::fields, data/tasks.h).
struct TaskConfig {
  std::string name = "copy";     // a row of task_kinds()
  SequenceTaskOptions sequence;  // copy, reverse, sort, recall, induction; mqar's --symbols
  MqarOptions mqar;
  ModularOptions modular;
  TextOptions text;            // the text task; mqar's --context
  ProgramDataOptions program;  // a program's own data
  TmsOptions tms;
};

// One held-out set's size, for the size checks and the memory estimate.
struct HeldoutSize {
  int64_t rows = 0, positions = 0;
  std::string flag;  // the flag that sets rows: "--eval-size 512"
  std::string what;  // for messages: "[sequences, T] held-out set"
};

// Tasks are held by shared_ptr (make_task and every row's make give one): the data sources a task
// makes share it.
class Task : public std::enable_shared_from_this<Task> {
 public:
  virtual ~Task() = default;

  const std::string& name() const { return name_; }
  // Vocabulary size V.
  virtual int64_t vocab_size() const = 0;
  // Positions a model of this kind (nn::model_kinds()) needs for the task's sequences. Throws
  // ConfigError for a kind that cannot read them.
  virtual int64_t positions(const std::string& model_kind) const = 0;
  // The flags that size a sequence and the vocabulary, for messages: "--length 10",
  // "--symbols 10".
  virtual std::string length_flag() const = 0;
  virtual std::string vocabulary_flag() const = 0;
  // The held-out set: its rows given --eval-size, and its positions given the model's.
  virtual HeldoutSize heldout_size(int64_t eval_size, int64_t model_positions) const = 0;

  // Sequences in the task's training set when it is finite (every step then draws from it,
  // --batch-size 0 takes all of it, and every evaluation scores it too: DataSource::
  // training_set), or 0 for a task that draws fresh samples at every step.
  virtual int64_t training_set_size() const { return 0; }

  // Reads what the task needs before its sizes are known (text: the file, whose vocabulary it
  // stores in config.text.vocabulary unless config has one already). Throws ConfigError
  // naming the file or flag. Nothing to do for a generated task.
  virtual void prepare(TaskConfig&) {}
  // The task's batches and held-out set as `model` reads them (nn::SequenceModel::make_batch).
  virtual std::shared_ptr<const DataSource> data_source(
      std::shared_ptr<const nn::SequenceModel> model, uint64_t seed, int64_t batch_size,
      int64_t eval_size) const = 0;

  // A language model reads running text and predicts every next token: its runs are judged by
  // the held-out loss, its progress line counts tokens, `gradlab eval` reports bits per token
  // and scores any file, and `gradlab sample` writes text from it. Null for a task that
  // answers prompts instead (sequence_task()).
  virtual const LanguageModelTask* language_model() const { return nullptr; }
  // The task's prompts and answers, for `gradlab predict` and `attention`; null for a language
  // model.
  virtual const SequenceTask* sequence_task() const { return nullptr; }
  // What Metrics::token_accuracy counts, for reports: every answer token by default; a task
  // whose counted targets are something else names them (mqar: "answer accuracy", per query).
  virtual std::string accuracy_name() const { return "token accuracy"; }
  // Whether a run is judged by its held-out loss (best.h5 is the lowest) rather than its exact
  // match: so is a task whose targets cannot all be predicted (running text, induction's first
  // copy), whose exact match stays near 0.
  virtual bool judged_by_loss() const { return language_model() != nullptr; }
  // Whether the samples are tokens the model predicts (every task but tms, whose samples are
  // feature vectors): only then do a run's reports show accuracy, exact match and tokens/s.
  virtual bool predicts_tokens() const { return true; }
  // The names of the parts of the held-out targets whose losses every evaluation reports beside
  // the whole's (DataSource::heldout_parts): metrics.csv's columns <name>_loss. None by default.
  virtual std::vector<std::string> loss_parts() const { return {}; }

 protected:
  explicit Task(std::string name) : name_(std::move(name)) {}

  // This task as the T it is, shared, for a data source to keep it alive. Throws
  // std::logic_error naming `who` for a task that no shared_ptr holds (one of the public task
  // classes built on the stack), where shared_from_this would be undefined.
  template <class T>
  std::shared_ptr<const T> shared_self(const char* who) const {
    const std::shared_ptr<const Task> self = weak_from_this().lock();
    if (!self) {
      throw std::logic_error(std::string(who) +
                             ": the task is not held by a shared_ptr (build it with "
                             "data::make_task or std::make_shared)");
    }
    return std::static_pointer_cast<const T>(self);
  }

 private:
  std::string name_;
};

// A task whose samples are running text in a vocabulary of tokens.
class LanguageModelTask : public Task {
 public:
  const LanguageModelTask* language_model() const override { return this; }
  virtual const Vocabulary& vocabulary() const = 0;
  // Tokens the model reads at once.
  virtual int64_t context() const = 0;
  // The tokens prepare() read (or the constructor was given) as bytes, empty before: what the
  // processes of a training group compare.
  virtual std::string_view token_bytes() const = 0;
  // What a token is, for "bits per character": "character" or "byte".
  virtual std::string token_unit() const = 0;
  // What the held-out set is read from, for messages: "input.txt (validation split)".
  virtual std::string heldout_description() const = 0;
  // Every token of the file at path, read with the model's vocabulary, as the held-out set
  // (to score a model on any text); training batches as data_source's. Throws ConfigError
  // naming the file.
  virtual std::shared_ptr<const DataSource> file_source(
      const std::string& path, std::shared_ptr<const nn::SequenceModel> model, uint64_t seed,
      int64_t batch_size) const = 0;

 protected:
  using Task::Task;
};

}  // namespace gradlab::data
