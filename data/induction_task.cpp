// The induction task (induction_task.h): its checks, the generator of repeated blocks, the two
// copies' targets, and its data source.
#include "data/induction_task.h"

#include <stdexcept>
#include <utility>

#include "autograd/error.h"
#include "autograd/format.h"
#include "data/distinct_draws.h"
#include "data/streams.h"
#include "data/task_rows.h"

namespace gradlab::data {
namespace {

constexpr const char* kFirstCopy = "first_copy";
constexpr const char* kSecondCopy = "second_copy";

class InductionData : public DataSource {
 public:
  InductionData(std::shared_ptr<const InductionTask> task, uint64_t seed, int64_t batch_size,
                int64_t heldout_size)
      : task_(std::move(task)),
        seed_(seed),
        batch_size_(batch_size),
        heldout_(task_->heldout_batch(seed, heldout_size)) {}
  nn::SequenceBatch training_batch(int64_t step) const override {
    return task_->training_batch(seed_, step, batch_size_);
  }
  nn::SequenceBatch heldout() const override { return heldout_; }
  std::vector<TargetPart> heldout_parts() const override { return task_->copy_parts(heldout_); }

 private:
  std::shared_ptr<const InductionTask> task_;
  uint64_t seed_;
  int64_t batch_size_;
  nn::SequenceBatch heldout_;
};

}  // namespace

InductionTask::InductionTask(std::string name, const SequenceTaskOptions& options)
    : SequenceTask(std::move(name), options) {
  if (length() < 2) {
    throw ConfigError("task: induction needs --length >= 2 (blocks of N/2 to N symbols), got " +
                      format_number(length()));
  }
  if (num_symbols() < length()) {
    throw ConfigError(
        "task: induction needs --symbols >= --length (a block's symbols are distinct), got "
        "--symbols " +
        format_number(num_symbols()) + " < --length " + format_number(length()));
  }
}

nn::SequenceBatch InductionTask::draw(Generator& gen, int64_t rows) const {
  const int64_t width = 2 * length();
  const uint64_t block_lengths = static_cast<uint64_t>(length() - shortest_block() + 1);
  std::vector<int64_t> inputs(static_cast<size_t>(rows * width), padding());  // [B, W]
  std::vector<int64_t> targets(inputs.size(), nn::kIgnoreTarget);
  for (int64_t b = 0; b < rows; ++b) {
    const int64_t block = shortest_block() + static_cast<int64_t>(gen.below(block_lengths));
    const std::vector<int64_t> symbols = distinct_draws(gen, 1, num_symbols(), block);
    std::vector<int64_t> sequence{kStart};
    sequence.insert(sequence.end(), symbols.begin(), symbols.end());
    sequence.insert(sequence.end(), symbols.begin(), symbols.end());
    for (int64_t t = 0; t < 2 * block; ++t) {
      inputs[static_cast<size_t>(b * width + t)] = sequence[static_cast<size_t>(t)];
      targets[static_cast<size_t>(b * width + t)] = sequence[static_cast<size_t>(t + 1)];
    }
  }
  return {Indices(), Indices({rows, width}, std::move(inputs)),
          Indices({rows, width}, std::move(targets))};
}

nn::SequenceBatch InductionTask::training_batch(uint64_t seed, int64_t step,
                                                int64_t batch_size) const {
  if (step < 0) throw ConfigError("task: step must be >= 0, got " + format_number(step));
  if (batch_size < 1) {
    throw ConfigError("task: batch_size must be >= 1, got " + format_number(batch_size));
  }
  Generator gen(stream_seed(seed, static_cast<uint64_t>(step)));
  return draw(gen, batch_size);
}

nn::SequenceBatch InductionTask::heldout_batch(uint64_t seed, int64_t count) const {
  if (count < 1) throw ConfigError("task: heldout count must be >= 1, got " + format_number(count));
  Generator gen(stream_seed(seed, kHeldoutIndex));
  return draw(gen, count);
}

std::vector<TargetPart> InductionTask::copy_parts(const nn::SequenceBatch& batch) const {
  const int64_t rows = batch.targets.shape[0], width = batch.targets.shape[1];
  std::vector<int64_t> first(batch.targets.values.size(), nn::kIgnoreTarget);
  std::vector<int64_t> second = first;
  for (int64_t b = 0; b < rows; ++b) {
    const int64_t* row = batch.targets.values.data() + b * width;
    int64_t counted = 0;
    while (counted < width && row[counted] != nn::kIgnoreTarget) ++counted;
    // A row's 2L targets: the first copy's L, then the second's.
    for (int64_t t = 0; t < counted; ++t) {
      (t < counted / 2 ? first : second)[static_cast<size_t>(b * width + t)] = row[t];
    }
  }
  return {{kFirstCopy, Indices(batch.targets.shape, std::move(first))},
          {kSecondCopy, Indices(batch.targets.shape, std::move(second))}};
}

int64_t InductionTask::positions(const std::string& model_kind) const {
  return nn::positions_for_windows(model_kind, 2 * length());
}

HeldoutSize InductionTask::heldout_size(int64_t eval_size, int64_t) const {
  return {eval_size, 2 * length(), "--eval-size " + format_number(eval_size),
          "[sequences, T] held-out set"};
}

std::shared_ptr<const DataSource> InductionTask::data_source(
    std::shared_ptr<const nn::SequenceModel> model, uint64_t seed, int64_t batch_size,
    int64_t eval_size) const {
  if (!model->kind().empty()) positions(model->kind());  // refuses the encoder-decoder
  return std::make_shared<InductionData>(shared_self<InductionTask>("InductionTask::data_source"),
                                         seed, batch_size, eval_size);
}

std::vector<std::string> InductionTask::loss_parts() const {
  return {kFirstCopy, kSecondCopy};
}

std::vector<int64_t> InductionTask::decoding_prefix(const std::vector<int64_t>& prompt) const {
  std::vector<int64_t> prefix{kStart};
  prefix.insert(prefix.end(), prompt.begin(), prompt.end());
  return prefix;
}

void InductionTask::check_prompt_length(int64_t size) const {
  if (size < 1 || size > length()) {
    throw ConfigError("task: induction prompt (a first copy) has " + format_number(size) +
                      " tokens, expected 1 to " + format_number(length()));
  }
}

std::shared_ptr<Task> make_induction_task(const TaskConfig& config) {
  return std::make_shared<InductionTask>(config.name, config.sequence);
}

}  // namespace gradlab::data
