// mqar: the generator of key-value pairs and power-law placed queries (Zoology's `_mqar` rules),
// its checks of the sizes, and its data source.
#include "data/mqar_task.h"

#include <cmath>
#include <functional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "autograd/error.h"
#include "autograd/format.h"
#include "data/distinct_draws.h"
#include "data/streams.h"
#include "data/task_rows.h"

namespace gradlab::data {
namespace {

// The vocabulary when --symbols is not given: Zoology uses 8192; 256 keeps the embedding and the
// logits of a small model small while leaving 127 keys to choose from.
constexpr int64_t kDefaultMqarSymbols = 256;
constexpr int64_t kMaxMqarSize = int64_t{1} << 20;

void refuse_unless(bool ok, const std::string& message) {
  if (!ok) throw ConfigError(message);
}

// count distinct slots of 0..weights.size() - 1, each drawn from the slots left with
// probability proportional to its weight (numpy's choice without replacement).
std::vector<int64_t> weighted_distinct_draws(Generator& gen, std::vector<double> weights,
                                             int64_t count) {
  std::vector<int64_t> drawn;
  drawn.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    double total = 0;
    for (const double w : weights) total += w;
    double u = gen.uniform() * total;
    size_t slot = 0, last_left = 0;
    for (; slot < weights.size(); ++slot) {
      if (weights[slot] == 0) continue;
      last_left = slot;
      if (u < weights[slot]) break;
      u -= weights[slot];
    }
    if (slot == weights.size()) slot = last_left;  // u rounded past the end
    weights[slot] = 0;
    drawn.push_back(static_cast<int64_t>(slot));
  }
  return drawn;
}

class MqarData : public DataSource {
 public:
  MqarData(std::shared_ptr<const MqarTask> task, uint64_t seed, int64_t batch_size,
           int64_t heldout_size)
      : task_(std::move(task)), seed_(seed), batch_size_(batch_size), heldout_size_(heldout_size) {}
  nn::SequenceBatch training_batch(int64_t step) const override {
    return task_->batch(seed_, step, batch_size_);
  }
  nn::SequenceBatch heldout() const override { return task_->heldout(seed_, heldout_size_); }

 private:
  std::shared_ptr<const MqarTask> task_;
  uint64_t seed_;
  int64_t batch_size_, heldout_size_;
};

}  // namespace

MqarTask::MqarTask(std::string name, const MqarOptions& options, int64_t context, int64_t symbols)
    : Task(std::move(name)), pairs_(options.pairs), context_(context), num_symbols_(symbols) {
  const std::string pairs_flag = "--pairs " + format_number(pairs_),
                    context_flag = "--context " + format_number(context_),
                    symbols_flag = "--symbols " + format_number(num_symbols_);
  refuse_unless(pairs_ >= 1 && pairs_ <= kMaxMqarSize,
                "--pairs must be in [1, 2^20], got " + pairs_flag);
  refuse_unless(context_ >= 1 && context_ <= kMaxMqarSize,
                "--context must be in [1, 2^20], got " + context_flag);
  refuse_unless(num_symbols_ >= 1 && num_symbols_ <= kMaxMqarSize,
                "--symbols must be in [1, 2^20], got " + symbols_flag);
  refuse_unless(context_ >= 4 * pairs_,
                context_flag + " cannot hold " + pairs_flag +
                    ": mqar needs --context >= 4 * pairs = " + format_number(4 * pairs_) +
                    " (2 tokens per key-value pair, then a 2-token slot per query)");
  refuse_unless(num_symbols_ >= 2 * pairs_ + 2,
                symbols_flag + " has " + format_number(first_value() - 1) +
                    " keys (1..symbols/2 - 1), fewer than " + pairs_flag +
                    ": mqar needs --symbols >= 2 * pairs + 2 = " + format_number(2 * pairs_ + 2));
}

nn::SequenceBatch MqarTask::draw(Generator& gen, int64_t rows) const {
  const int64_t T = context_, N = pairs_;
  const int64_t slots = (T - 2 * N) / 2;
  std::vector<double> gap_weights(static_cast<size_t>(slots));
  for (int64_t g = 0; g < slots; ++g) {
    gap_weights[static_cast<size_t>(g)] = std::pow(static_cast<double>(g + 1), kMqarPowerA - 1);
  }
  std::vector<int64_t> inputs(static_cast<size_t>(rows * T));  // [B, T]
  std::vector<int64_t> targets(inputs.size(), nn::kIgnoreTarget);
  for (int64_t b = 0; b < rows; ++b) {
    int64_t* in = inputs.data() + b * T;
    int64_t* target = targets.data() + b * T;
    for (int64_t t = 0; t < T; ++t) {
      in[t] = static_cast<int64_t>(gen.below(static_cast<uint64_t>(num_symbols_)));
    }
    const std::vector<int64_t> keys = distinct_draws(gen, 1, first_value() - 1, N);
    const std::vector<int64_t> values =
        distinct_draws(gen, first_value(), num_symbols_ - first_value(), N);
    const std::vector<int64_t> gaps = weighted_distinct_draws(gen, gap_weights, N);
    for (int64_t i = 0; i < N; ++i) {
      const size_t pair = static_cast<size_t>(i);
      in[2 * i] = keys[pair];
      in[2 * i + 1] = values[pair];
      const int64_t query = 2 * N + 2 * gaps[pair];
      in[query] = keys[pair];
      target[query] = values[pair];
    }
  }
  return {Indices(), Indices({rows, T}, std::move(inputs)), Indices({rows, T}, std::move(targets))};
}

nn::SequenceBatch MqarTask::batch(uint64_t seed, int64_t step, int64_t batch_size) const {
  refuse_unless(step >= 0, "task: step must be >= 0, got " + format_number(step));
  refuse_unless(batch_size >= 1, "task: batch_size must be >= 1, got " + format_number(batch_size));
  Generator gen(stream_seed(seed, static_cast<uint64_t>(step)));
  return draw(gen, batch_size);
}

nn::SequenceBatch MqarTask::heldout(uint64_t seed, int64_t count) const {
  refuse_unless(count >= 1, "task: heldout count must be >= 1, got " + format_number(count));
  Generator gen(stream_seed(seed, kHeldoutIndex));
  return draw(gen, count);
}

int64_t MqarTask::positions(const std::string& model_kind) const {
  return nn::positions_for_windows(model_kind, context_);
}

std::string MqarTask::length_flag() const {
  return "--context " + format_number(context_);
}

std::string MqarTask::vocabulary_flag() const {
  return "--symbols " + format_number(num_symbols_);
}

HeldoutSize MqarTask::heldout_size(int64_t eval_size, int64_t) const {
  return {eval_size, context_, "--eval-size " + format_number(eval_size),
          "[sequences, T] held-out set"};
}

std::shared_ptr<const DataSource> MqarTask::data_source(
    std::shared_ptr<const nn::SequenceModel> model, uint64_t seed, int64_t batch_size,
    int64_t eval_size) const {
  if (!model->kind().empty()) positions(model->kind());  // refuses the encoder-decoder
  return std::make_shared<MqarData>(shared_self<MqarTask>("MqarTask::data_source"), seed,
                                    batch_size, eval_size);
}

std::shared_ptr<Task> make_mqar_task(const TaskConfig& config) {
  return std::make_shared<MqarTask>(config.name, config.mqar, config.text.context,
                                    config.sequence.num_symbols);
}

std::vector<ConfigField> mqar_task_fields(TaskConfig& c) {
  // --context and --symbols are the text's and the sequence tasks' flags: one field each.
  const auto shared = [](const std::vector<ConfigField>& fields, const std::string& key) {
    for (const ConfigField& f : fields) {
      if (f.key == key) return f;
    }
    throw std::logic_error("mqar_task_fields: no field " + key);
  };
  return {
      {"pairs", &c.mqar.pairs, "--task mqar: key-value pairs per sequence, each key queried once"},
      shared(text_task_fields(c), "context"),
      shared(sequence_task_fields(c), "symbols"),
  };
}

void mqar_own_defaults(TaskConfig& config, const std::function<bool(const char* key)>& given) {
  if (!given("symbols")) config.sequence.num_symbols = kDefaultMqarSymbols;
}

}  // namespace gradlab::data
