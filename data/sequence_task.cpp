// What every sequence task shares: sizes, the sample layout, prompt checks, the seeded streams
// of batches, and their data source.
#include "data/sequence_task.h"

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "autograd/error.h"
#include "autograd/format.h"
#include "data/streams.h"
#include "data/tasks.h"

namespace gradlab::data {
namespace {

using Sequence = std::vector<int64_t>;

void require_positive(const std::string& what, int64_t value) {
  if (value < 1) throw ConfigError("task: " + what + " must be >= 1, got " + format_number(value));
}

// count samples drawn in order from gen, as rows of [count, L].
Indices draw(const SequenceTask& task, Generator& gen, int64_t count) {
  const int64_t length = task.sample_length();
  std::vector<int64_t> values;
  values.reserve(static_cast<size_t>(count * length));
  for (int64_t i = 0; i < count; ++i) {
    const Sequence s = task.sample(gen);
    values.insert(values.end(), s.begin(), s.end());
  }
  return Indices({count, length}, std::move(values));
}

}  // namespace

SequenceTask::SequenceTask(std::string name, const SequenceTaskOptions& options)
    : Task(std::move(name)), length_(options.length), num_symbols_(options.num_symbols) {
  require_positive("--length", length_);
  require_positive("--symbols", num_symbols_);
  if (length_ > (1 << 20) || num_symbols_ > (1 << 20)) {
    throw ConfigError("task: --length and --symbols must be at most 2^20, got " +
                      format_number(length_) + " and " + format_number(num_symbols_));
  }
}

std::vector<int64_t> SequenceTask::draw_prompt(Generator& gen) const {
  const uint64_t symbols = static_cast<uint64_t>(num_symbols_);
  Sequence prompt;
  for (int64_t i = 0; i < length_; ++i) {
    prompt.push_back(static_cast<int64_t>(gen.below(symbols)) + 1);
  }
  return prompt;
}

std::vector<int64_t> SequenceTask::sample(Generator& gen) const {
  Sequence s = draw_prompt(gen);
  const Sequence a = answer(s);
  s.push_back(kSeparator);
  s.insert(s.end(), a.begin(), a.end());
  return s;
}

std::vector<int64_t> SequenceTask::answer(const std::vector<int64_t>& prompt) const {
  validate_prompt(prompt);
  return answer_of(prompt);
}

void SequenceTask::validate_prompt(const std::vector<int64_t>& prompt) const {
  const int64_t size = static_cast<int64_t>(prompt.size());
  check_prompt_length(size);
  for (int64_t i = 0; i < size; ++i) {
    const int64_t v = prompt[static_cast<size_t>(i)];
    if (v < 1 || v > num_symbols_) {
      throw ConfigError("task: prompt token " + format_number(i) + " is " + format_number(v) +
                        ", outside the data symbols 1.." + format_number(num_symbols_));
    }
  }
  check_prompt(prompt);
}

void SequenceTask::check_prompt_length(int64_t size) const {
  if (size != prompt_length()) {
    throw ConfigError("task: " + name() + " prompt has " + format_number(size) +
                      " tokens, expected " + format_number(prompt_length()));
  }
}

std::vector<int64_t> SequenceTask::decoding_prefix(const std::vector<int64_t>& prompt) const {
  Sequence prefix = prompt;
  prefix.push_back(kSeparator);
  return prefix;
}

Indices SequenceTask::samples(uint64_t seed, int64_t step, int64_t batch_size) const {
  if (step < 0) throw ConfigError("task: step must be >= 0, got " + format_number(step));
  require_positive("batch_size", batch_size);
  Generator gen(stream_seed(seed, static_cast<uint64_t>(step)));
  return draw(*this, gen, batch_size);
}

Indices SequenceTask::heldout(uint64_t seed, int64_t count) const {
  require_positive("heldout count", count);
  Generator gen(stream_seed(seed, kHeldoutIndex));
  return draw(*this, gen, count);
}

int64_t SequenceTask::positions(const std::string& model_kind) const {
  return nn::positions_needed(model_kind, prompt_length(), answer_length());
}

std::string SequenceTask::length_flag() const {
  return "--length " + format_number(length_);
}

std::string SequenceTask::vocabulary_flag() const {
  return "--symbols " + format_number(num_symbols_);
}

HeldoutSize SequenceTask::heldout_size(int64_t eval_size, int64_t model_positions) const {
  return {eval_size, model_positions, "--eval-size " + format_number(eval_size),
          "[sequences, T] held-out set"};
}

std::shared_ptr<const DataSource> SequenceTask::data_source(
    std::shared_ptr<const nn::SequenceModel> model, uint64_t seed, int64_t batch_size,
    int64_t eval_size) const {
  return std::make_shared<TaskData>(shared_self<SequenceTask>("SequenceTask::data_source"),
                                    std::move(model), seed, batch_size, eval_size);
}

std::vector<ConfigField> sequence_task_fields(TaskConfig& c) {
  SequenceTaskOptions& s = c.sequence;
  return {
      {"length", &s.length,
       "data tokens per sample (recall: key-value pairs; induction: the longest block)"},
      {"symbols", &s.num_symbols,
       "number of data symbols (vocabulary = symbols + 2); --task mqar: the vocabulary, 256 "
       "unless given"},
  };
}

std::shared_ptr<SequenceTask> make_sequence_task(const TaskConfig& config) {
  std::shared_ptr<Task> task = make_task(config);
  if (!task->sequence_task()) {
    throw ConfigError("task: " + config.name + " is not a sequence task (no prompts to answer)");
  }
  return std::static_pointer_cast<SequenceTask>(task);
}

TaskData::TaskData(std::shared_ptr<const SequenceTask> task,
                   std::shared_ptr<const nn::SequenceModel> model, uint64_t seed,
                   int64_t batch_size, int64_t heldout_size)
    : task_(std::move(task)),
      model_(std::move(model)),
      seed_(seed),
      batch_size_(batch_size),
      heldout_size_(heldout_size) {}

TaskData::TaskData(const TaskConfig& task, std::shared_ptr<const nn::SequenceModel> model,
                   uint64_t seed, int64_t batch_size, int64_t heldout_size)
    : TaskData(make_sequence_task(task), std::move(model), seed, batch_size, heldout_size) {}

nn::SequenceBatch TaskData::training_batch(int64_t step) const {
  return model_->make_batch(task_->samples(seed_, step, batch_size_), task_->prompt_length());
}

nn::SequenceBatch TaskData::heldout() const {
  return model_->make_batch(task_->heldout(seed_, heldout_size_), task_->prompt_length());
}

}  // namespace gradlab::data
