// Toy sequence tasks, generated deterministically: a batch is a pure function of
// (seed, step), so a resumed run sees exactly the batches it would have seen.
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
#include <string>
#include <vector>

#include "autograd/indices.h"
#include "autograd/random.h"

namespace gradlab::data {

constexpr int64_t kSeparator = 0;

struct TaskConfig {
  std::string name = "copy";  // copy | reverse | sort | recall
  int64_t length = 10;        // data tokens per sample (recall: key-value pairs)
  int64_t num_symbols = 10;   // data symbols 1..num_symbols
};

class Task {
 public:
  // Throws ConfigError naming the field for an unknown name or a bad size.
  explicit Task(const TaskConfig& config);

  const TaskConfig& config() const { return config_; }
  int64_t vocab_size() const { return config_.num_symbols + 2; }
  int64_t padding() const { return config_.num_symbols + 1; }
  int64_t prompt_length() const;  // tokens before the separator
  int64_t answer_length() const;  // tokens after it
  int64_t sample_length() const { return prompt_length() + 1 + answer_length(); }

  // One sample drawn from gen: prompt, separator, answer.
  std::vector<int64_t> sample(Generator& gen) const;
  // The correct answer for a prompt (for greedy-decoding checks in `gradlab predict`).
  std::vector<int64_t> answer(const std::vector<int64_t>& prompt) const;
  // Throws ConfigError naming the problem if prompt is not a valid prompt for this task.
  void validate_prompt(const std::vector<int64_t>& prompt) const;

  // Training batch number `step` of the stream `seed`: batch_size samples [B, L], each
  // prompt, separator, answer (L = sample_length()); a model lays them out with its make_batch
  // (nn/sequence_model.h). Throws ConfigError for step < 0 or batch_size < 1.
  Indices samples(uint64_t seed, int64_t step, int64_t batch_size) const;
  // The fixed held-out set [count, L]: drawn from a stream separate from every training
  // stream. Throws ConfigError for count < 1.
  Indices heldout(uint64_t seed, int64_t count) const;

 private:
  TaskConfig config_;
};

}  // namespace gradlab::data
