// The sequence tasks: a prompt of data symbols, a separator, and an answer the model must
// produce, generated deterministically: a batch is a pure function of (seed, step), so a
// resumed run sees exactly the batches it would have seen. copy, reverse and sort
// (copy_task.cpp) and recall (recall_task.cpp) are its kinds.
//
// Vocabulary: 0 = separator, 1..num_symbols = data symbols, num_symbols + 1 = padding;
// vocab_size = num_symbols + 2. A sample is a prompt, the separator, then the answer
// (n = length):
//   copy     x1..xn SEP x1..xn              prompt n, answer n
//   reverse  x1..xn SEP xn..x1              prompt n, answer n
//   sort     x1..xn SEP sorted(x)           prompt n, answer n (ascending, repeats kept)
//   recall   k1 v1 .. kn vn q SEP v(q)      prompt 2n + 1, answer 1
// Data symbols are drawn uniformly with gen.below(num_symbols) + 1. Recall keys are distinct
// (a partial Fisher-Yates shuffle of 1..num_symbols, so num_symbols >= length), values are
// uniform and may repeat, and the query is a uniformly chosen key: the query belongs to the
// prompt, so the only predicted token is its value.
//
// Streams: training batch `step` (>= 0) of `seed` draws its rows in order from one generator
// seeded by a hash of (seed, step) that is a bijection of step for a fixed seed; the held-out
// set draws from the same hash at an index no training step uses. Batches therefore do not
// depend on call order, and heldout(seed, m) is a prefix of heldout(seed, n) for m <= n.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/indices.h"
#include "autograd/random.h"
#include "data/task.h"

namespace gradlab::data {

constexpr int64_t kSeparator = 0;

class SequenceTask : public Task {
 public:
  int64_t length() const { return length_; }
  int64_t num_symbols() const { return num_symbols_; }
  int64_t padding() const { return num_symbols_ + 1; }
  virtual int64_t prompt_length() const = 0;  // tokens before the separator
  virtual int64_t answer_length() const = 0;  // tokens after it
  int64_t sample_length() const { return prompt_length() + 1 + answer_length(); }

  // One sample drawn from gen: prompt, separator, answer.
  std::vector<int64_t> sample(Generator& gen) const;
  // The correct answer for a prompt (for greedy-decoding checks in `gradlab predict`). Throws
  // ConfigError as validate_prompt does.
  std::vector<int64_t> answer(const std::vector<int64_t>& prompt) const;
  // Throws ConfigError naming the problem if prompt is not a valid prompt for this task.
  void validate_prompt(const std::vector<int64_t>& prompt) const;
  // What a decoder-only model reads of a valid prompt before it says the answer's first token:
  // the prompt and the separator by default (induction: the start token and the first copy).
  virtual std::vector<int64_t> decoding_prefix(const std::vector<int64_t>& prompt) const;

  // Training batch number `step` of the stream `seed`: batch_size samples [B, L], each
  // prompt, separator, answer (L = sample_length()); a model lays them out with its make_batch
  // (nn/sequence_model.h). Throws ConfigError for step < 0 or batch_size < 1.
  Indices samples(uint64_t seed, int64_t step, int64_t batch_size) const;
  // The fixed held-out set [count, L]: drawn from a stream separate from every training
  // stream. Throws ConfigError for count < 1.
  Indices heldout(uint64_t seed, int64_t count) const;

  int64_t vocab_size() const override { return num_symbols_ + 2; }
  int64_t positions(const std::string& model_kind) const override;
  std::string length_flag() const override;
  std::string vocabulary_flag() const override;
  HeldoutSize heldout_size(int64_t eval_size, int64_t model_positions) const override;
  std::shared_ptr<const DataSource> data_source(std::shared_ptr<const nn::SequenceModel> model,
                                                uint64_t seed, int64_t batch_size,
                                                int64_t eval_size) const override;
  const SequenceTask* sequence_task() const override { return this; }

 protected:
  // The task of the row `name`, sized by options. Throws ConfigError naming the flag for a size
  // below 1 or above 2^20.
  SequenceTask(std::string name, const SequenceTaskOptions& options);

  // A prompt drawn from gen.
  virtual std::vector<int64_t> draw_prompt(Generator& gen) const;
  // The answer of a valid prompt.
  virtual std::vector<int64_t> answer_of(const std::vector<int64_t>& prompt) const = 0;
  // Throws ConfigError unless a prompt may have `size` tokens: prompt_length() by default.
  virtual void check_prompt_length(int64_t size) const;
  // What validate_prompt checks beyond the length and the symbols.
  virtual void check_prompt(const std::vector<int64_t>&) const {}

 private:
  int64_t length_, num_symbols_;
};

// The options of every sequence task, bound to config.sequence: --length and --symbols.
std::vector<ConfigField> sequence_task_fields(TaskConfig& config);

// A sequence task of task_kinds() (data/tasks.h). Throws ConfigError for an unknown name, a
// task that is not a sequence task, or a bad size.
std::shared_ptr<SequenceTask> make_sequence_task(const TaskConfig& config);

// A sequence task as the model reads it (its make_batch of the task's samples).
class TaskData : public DataSource {
 public:
  TaskData(std::shared_ptr<const SequenceTask> task, std::shared_ptr<const nn::SequenceModel> model,
           uint64_t seed, int64_t batch_size, int64_t heldout_size);
  TaskData(const TaskConfig& task, std::shared_ptr<const nn::SequenceModel> model, uint64_t seed,
           int64_t batch_size, int64_t heldout_size);
  nn::SequenceBatch training_batch(int64_t step) const override;
  nn::SequenceBatch heldout() const override;

 private:
  std::shared_ptr<const SequenceTask> task_;
  std::shared_ptr<const nn::SequenceModel> model_;
  uint64_t seed_;
  int64_t batch_size_, heldout_size_;
};

}  // namespace gradlab::data
