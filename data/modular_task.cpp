// The modular task (modular_task.h): its operations, its checks, the seeded split of the P^2
// pairs, and the data source that trains on one part and holds out the other.
#include "data/modular_task.h"

#include <cmath>
#include <numeric>
#include <utility>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/kinds.h"
#include "data/streams.h"
#include "data/task_rows.h"

namespace gradlab::data {
namespace {

// The sequence tasks' sizes of a modular task: two prompt symbols out of P. The modulus is
// checked here, before SequenceTask's checks, so that its message names --modulus.
SequenceTaskOptions sequence_options(const ModularOptions& options) {
  if (options.modulus < 2 || options.modulus > ModularTask::kMaxModulus) {
    throw ConfigError("task: --modulus must be in [2, " + format_number(ModularTask::kMaxModulus) +
                      "], got " + format_number(options.modulus));
  }
  return {.length = 2, .num_symbols = options.modulus};
}

// The sample of pair number `pair` (a = pair / P, b = pair % P), tokens x + 1.
void append_sample(const ModularOperation& operation, int64_t modulus, int64_t pair,
                   std::vector<int64_t>& values) {
  const int64_t a = pair / modulus, b = pair % modulus;
  values.insert(values.end(), {a + 1, b + 1, kSeparator, operation.apply(a, b, modulus) + 1});
}

// A modular run's data: the split drawn once, batches from its training part.
class ModularData : public DataSource {
 public:
  ModularData(std::shared_ptr<const ModularTask> task,
              std::shared_ptr<const nn::SequenceModel> model, uint64_t seed, int64_t batch_size)
      : task_(std::move(task)),
        model_(std::move(model)),
        seed_(seed),
        batch_size_(batch_size),
        split_(task_->split(seed)),
        training_set_(model_->make_batch(split_.train, task_->prompt_length())) {}

  nn::SequenceBatch training_batch(int64_t step) const override {
    if (batch_size_ == 0) return training_set_;
    return model_->make_batch(task_->training_samples(split_, seed_, step, batch_size_),
                              task_->prompt_length());
  }
  nn::SequenceBatch heldout() const override {
    return model_->make_batch(split_.heldout, task_->prompt_length());
  }
  std::optional<nn::SequenceBatch> training_set() const override { return training_set_; }

 private:
  std::shared_ptr<const ModularTask> task_;
  std::shared_ptr<const nn::SequenceModel> model_;
  uint64_t seed_;
  int64_t batch_size_;
  ModularSplit split_;
  nn::SequenceBatch training_set_;
};

}  // namespace

const std::vector<ModularOperation>& modular_operations() {
  static const std::vector<ModularOperation> operations{
      {"add", [](int64_t a, int64_t b, int64_t p) { return (a + b) % p; }},
      {"sub", [](int64_t a, int64_t b, int64_t p) { return (a - b + p) % p; }},
      {"mul", [](int64_t a, int64_t b, int64_t p) { return a * b % p; }},
  };
  return operations;
}

ModularTask::ModularTask(std::string name, const ModularOptions& options)
    : SequenceTask(std::move(name), sequence_options(options)),
      operation_(
          &row_named(modular_operations(), options.operation, "operation", "task: --operation: ")),
      train_fraction_(options.train_fraction) {
  // Written as "not inside" so that NaN is refused too.
  if (!(train_fraction_ > 0 && train_fraction_ < 1)) {
    throw ConfigError("task: --train-fraction must be in (0, 1), got " +
                      format_number(train_fraction_));
  }
  const int64_t pairs = modulus() * modulus();
  training_pairs_ = std::llround(train_fraction_ * static_cast<double>(pairs));
  if (training_pairs_ < 1 || training_pairs_ >= pairs) {
    throw ConfigError("task: --train-fraction " + format_number(train_fraction_) + " of the " +
                      format_number(pairs) + " pairs of --modulus " + format_number(modulus()) +
                      " leaves " + (training_pairs_ < 1 ? "no training pair" : "no held-out pair"));
  }
}

ModularSplit ModularTask::split(uint64_t seed) const {
  const int64_t p = modulus(), pairs = p * p;
  std::vector<int64_t> order(static_cast<size_t>(pairs));
  std::iota(order.begin(), order.end(), int64_t{0});
  Generator gen(stream_seed(seed, kSplitIndex));
  for (int64_t i = pairs - 1; i > 0; --i) {
    std::swap(order[static_cast<size_t>(i)], order[gen.below(static_cast<uint64_t>(i) + 1)]);
  }
  const auto samples = [&](int64_t begin, int64_t end) {
    std::vector<int64_t> values;
    values.reserve(static_cast<size_t>(4 * (end - begin)));
    for (int64_t i = begin; i < end; ++i) {
      append_sample(*operation_, p, order[static_cast<size_t>(i)], values);
    }
    return Indices({end - begin, 4}, std::move(values));
  };
  return {samples(0, training_pairs_), samples(training_pairs_, pairs)};
}

Indices ModularTask::training_samples(const ModularSplit& split, uint64_t seed, int64_t step,
                                      int64_t batch_size) const {
  if (step < 0) throw ConfigError("task: step must be >= 0, got " + format_number(step));
  if (batch_size < 0) {
    throw ConfigError("task: batch_size must be >= 0, got " + format_number(batch_size));
  }
  if (batch_size == 0) return split.train;
  const int64_t rows = split.train.shape[0], width = split.train.shape[1];
  Generator gen(stream_seed(seed, static_cast<uint64_t>(step)));
  std::vector<int64_t> values;
  values.reserve(static_cast<size_t>(batch_size * width));
  for (int64_t i = 0; i < batch_size; ++i) {
    const auto row = split.train.values.begin() +
                     static_cast<int64_t>(gen.below(static_cast<uint64_t>(rows))) * width;
    values.insert(values.end(), row, row + width);
  }
  return Indices({batch_size, width}, std::move(values));
}

std::vector<int64_t> ModularTask::answer_of(const std::vector<int64_t>& prompt) const {
  return {operation_->apply(prompt[0] - 1, prompt[1] - 1, modulus()) + 1};
}

std::string ModularTask::length_flag() const {
  return "--task modular";  // its sequences are always `a b = c`
}

std::string ModularTask::vocabulary_flag() const {
  return "--modulus " + format_number(modulus());
}

HeldoutSize ModularTask::heldout_size(int64_t, int64_t model_positions) const {
  return {modulus() * modulus() - training_pairs_, model_positions,
          vocabulary_flag() + " --train-fraction " + format_number(train_fraction_),
          "[held-out pairs, T] held-out set"};
}

std::shared_ptr<const DataSource> ModularTask::data_source(
    std::shared_ptr<const nn::SequenceModel> model, uint64_t seed, int64_t batch_size,
    int64_t) const {
  return std::make_shared<ModularData>(shared_self<ModularTask>("ModularTask::data_source"),
                                       std::move(model), seed, batch_size);
}

std::vector<ConfigField> modular_task_fields(TaskConfig& c) {
  static const std::string operation_help =
      "--task modular: the operation, " + names_of(modular_operations());
  ModularOptions& m = c.modular;
  return {
      {"modulus", &m.modulus, "--task modular: the modulus P (the vocabulary is P + 2)"},
      {"operation", &m.operation, operation_help.c_str()},
      {"train-fraction", &m.train_fraction,
       "--task modular: the part of the P^2 pairs trained on; the rest is held out"},
  };
}

std::shared_ptr<Task> make_modular_task(const TaskConfig& config) {
  return std::make_shared<ModularTask>(config.name, config.modular);
}

}  // namespace gradlab::data
