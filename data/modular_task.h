// modular: arithmetic modulo a prime-like P, the data of the grokking experiments (Power et al.
// 2022; Nanda et al. 2023). Every one of the P^2 pairs (a, b) is a sample `a b = c` with
// c = (a op b) mod P; the pairs are split once, by a permutation seeded from the run's seed, into
// a training set and a held-out set, and training draws from the training set only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/sequence_task.h"

namespace gradlab::data {

// A row of --operation: its name and (a op b) mod modulus for a, b in [0, modulus).
struct ModularOperation {
  const char* name;
  int64_t (*apply)(int64_t a, int64_t b, int64_t modulus);
};
// add, sub and mul.
const std::vector<ModularOperation>& modular_operations();

// The two parts of the P^2 pairs, each as samples [N, 4]: a, b, the separator, c (numbers as
// tokens: number x is token x + 1).
struct ModularSplit {
  Indices train, heldout;
};

// The layout is Nanda's: the prompt is the two numbers, the operation is the run's (--operation)
// and not a token, and the answer is read at the separator, which plays `=`. The vocabulary is
// the sequence tasks' (data/sequence_task.h): separator, the P numbers, padding.
class ModularTask : public SequenceTask {
 public:
  // The task of the row `name`. Throws ConfigError naming the flag: --modulus outside
  // [2, kMaxModulus], an unknown --operation, --train-fraction outside (0, 1), or a fraction that
  // leaves either part empty.
  ModularTask(std::string name, const ModularOptions& options);
  static constexpr int64_t kMaxModulus = 4096;  // the P^2 pairs are enumerated

  int64_t modulus() const { return num_symbols(); }
  int64_t prompt_length() const override { return 2; }
  int64_t answer_length() const override { return 1; }
  // round(train_fraction * P^2): the size of the training set.
  int64_t training_set_size() const override { return training_pairs_; }

  // The split of `seed`: the P^2 pairs in the order of one Fisher-Yates shuffle drawn from the
  // seed's split stream (data/streams.h), the first training_set_size() of them for training.
  ModularSplit split(uint64_t seed) const;
  // Training batch `step` (>= 0) from split.train: all of it with batch_size 0 (full batch),
  // else batch_size rows drawn uniformly with replacement from the step's stream, a pure
  // function of (seed, step). Throws ConfigError for a negative step or batch size.
  Indices training_samples(const ModularSplit& split, uint64_t seed, int64_t step,
                           int64_t batch_size) const;

  std::string length_flag() const override;
  std::string vocabulary_flag() const override;
  // The held-out set is every pair not trained on: --eval-size does not size it.
  HeldoutSize heldout_size(int64_t eval_size, int64_t model_positions) const override;
  std::shared_ptr<const DataSource> data_source(std::shared_ptr<const nn::SequenceModel> model,
                                                uint64_t seed, int64_t batch_size,
                                                int64_t eval_size) const override;

 private:
  std::vector<int64_t> answer_of(const std::vector<int64_t>& prompt) const override;

  const ModularOperation* operation_;
  double train_fraction_;
  int64_t training_pairs_;
};

// The modular task's options bound to config.modular: --modulus, --operation, --train-fraction.
std::vector<ConfigField> modular_task_fields(TaskConfig& config);

}  // namespace gradlab::data
