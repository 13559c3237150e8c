// The training step and evaluation of any SequenceModel, and the runs built from a RunConfig.
#include "train/trainer.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <span>

#include "autograd/format.h"
#include "autograd/ops.h"
#include "data/fingerprint.h"

namespace gradlab::train {
namespace {

// Refuses a model with NaN or infinite weights, which only a diverged run can have saved (fit
// never writes one): evaluating or resuming it would only spread the NaNs.
void require_finite(const CheckpointData& data, const std::string& path) {
  for (const auto& [name, value] : data.model) {
    if (!std::isfinite(global_norm({value}))) {
      throw CheckpointError(path + ": " + kModelGroup + "/" + name +
                            ": holds non-finite values (saved from a diverged run)");
    }
  }
}

ProcessGroup& alone() {
  static ProcessGroup group;
  return group;
}

// Position of the largest logit in row `row` of a [N, V] view.
int64_t argmax_row(const float* logits, int64_t row, int64_t vocab) {
  const float* r = logits + row * vocab;
  int64_t best = 0;
  for (int64_t v = 1; v < vocab; ++v) {
    if (r[v] > r[best]) best = v;
  }
  return best;
}

// Rows [start, start + count) of a [B, T] index array (an empty array stays empty).
Indices rows_of(const Indices& batch, int64_t start, int64_t count) {
  if (batch.shape.empty()) return batch;
  const int64_t length = batch.shape[1];
  return Indices({count, length},
                 std::vector<int64_t>(batch.values.begin() + start * length,
                                      batch.values.begin() + (start + count) * length));
}

nn::SequenceBatch rows_of(const nn::SequenceBatch& batch, int64_t start, int64_t count) {
  return {rows_of(batch.source, start, count), rows_of(batch.inputs, start, count),
          rows_of(batch.targets, start, count)};
}

// The rows [begin, end) of `rows` that process `rank` of `size` takes: shares as equal as can
// be, contiguous, in rank order.
std::pair<int64_t, int64_t> share_of(int64_t rows, const ProcessGroup& group) {
  return {rows * group.rank() / group.size(), rows * (group.rank() + 1) / group.size()};
}

// Targets that count in the loss.
int64_t counted_targets(const Indices& targets) {
  return std::count_if(targets.values.begin(), targets.values.end(),
                       [](int64_t t) { return t != nn::kIgnoreTarget; });
}

uint64_t hash_tensors(const std::vector<nn::NamedTensor>& tensors, uint64_t hash) {
  for (const auto& [name, t] : tensors) {
    hash = data::fingerprint(name.data(), name.size(), hash);
    hash = data::fingerprint(t.node()->storage->data(),
                             static_cast<size_t>(t.numel()) * dtype_size(t.dtype()), hash);
  }
  return hash;
}

// Counts over held-out chunks.
struct Tally {
  int64_t rows = 0, counted = 0, correct = 0, exact = 0;
  double loss_sum = 0;
};

void tally(const Tensor& logits, const Indices& targets, Tally& t) {
  const Tensor probs = logits.to(DType::Float32);
  const int64_t rows = targets.shape[0], length = targets.shape[1], vocab = logits.size(-1);
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    bool all_right = true;
    for (int64_t i = 0; i < length; ++i) {
      const int64_t target = targets.values[r * length + i];
      if (target == nn::kIgnoreTarget) continue;
      const bool right = argmax_row(probs.data<float>(), r * length + i, vocab) == target;
      ++counted;
      t.correct += right;
      all_right = all_right && right;
    }
    t.exact += all_right;
  }
  t.rows += rows;
  t.counted += counted;
  // cross_entropy is the mean over this chunk's counted targets; weight it back to a sum.
  t.loss_sum +=
      cross_entropy(logits, targets, nn::kIgnoreTarget).item() * static_cast<double>(counted);
}

TrainerOptions options_of(const RunConfig& config) {
  return {.schedule = config.schedule,
          .clip_norm = config.clip_norm,
          // The training batch size: the same buffer sizes as a training step, so the storage
          // pool serves them and peak memory stays that of training.
          .eval_batch_size = config.batch_size,
          .data_seed = config.seed,
          .config = to_entries(config)};
}

// The built-in task or the text file a RunConfig names, as the model reads it.
std::shared_ptr<const DataSource> data_source(const RunConfig& config,
                                              std::shared_ptr<const nn::SequenceModel> model,
                                              std::shared_ptr<const data::TextCorpus> corpus);

}  // namespace

TaskData::TaskData(const data::TaskConfig& task, std::shared_ptr<const nn::SequenceModel> model,
                   uint64_t seed, int64_t batch_size, int64_t heldout_size)
    : task_(task),
      model_(std::move(model)),
      seed_(seed),
      batch_size_(batch_size),
      heldout_size_(heldout_size) {}

nn::SequenceBatch TaskData::training_batch(int64_t step) const {
  return model_->make_batch(task_.samples(seed_, step, batch_size_), task_.prompt_length());
}

nn::SequenceBatch TaskData::heldout() const {
  return model_->make_batch(task_.heldout(seed_, heldout_size_), task_.prompt_length());
}

TextData::TextData(std::shared_ptr<const data::TextCorpus> corpus,
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

std::shared_ptr<const data::TextCorpus> load_text_corpus(RunConfig& config) {
  if (config.data.empty()) throw ConfigError("--task text needs --data FILE");
  if (config.context < 1 || config.context > (1 << 20)) {
    throw ConfigError("--context must be in [1, 2^20], got " + format_number(config.context));
  }
  std::shared_ptr<const data::TextCorpus> corpus;
  if (config.vocabulary.empty() && config.tokenizer != "byte") {
    corpus = std::make_shared<data::TextCorpus>(config.data, config.tokenizer, config.val_fraction);
    config.vocabulary = corpus->vocabulary().serialize();
  } else {
    corpus = std::make_shared<data::TextCorpus>(
        config.data, data::Vocabulary::deserialize(config.tokenizer, config.vocabulary),
        config.val_fraction);
  }
  corpus->require_windows(config.context);
  return corpus;
}

Trainer::Trainer(std::shared_ptr<nn::SequenceModel> model, std::unique_ptr<Optimizer> optimizer,
                 std::shared_ptr<const DataSource> data, TrainerOptions options)
    : model_(std::move(model)),
      optimizer_(std::move(optimizer)),
      data_(std::move(data)),
      options_(std::move(options)),
      heldout_(data_->heldout()),
      group_(&alone()) {}

Trainer::Trainer(const RunConfig& config, std::shared_ptr<const data::TextCorpus> corpus)
    : Trainer(nn::make_sequence_model(config.model, config.net), config, std::move(corpus)) {}

Trainer::Trainer(std::shared_ptr<nn::SequenceModel> model, const RunConfig& config,
                 std::shared_ptr<const data::TextCorpus> corpus)
    : Trainer(model, make_optimizer(config.optimizer, model->named_parameters()),
              data_source(config, model, std::move(corpus)), options_of(config)) {}

StepResult Trainer::train_step() {
  model_->train();
  const int64_t next = step_ + 1;
  const nn::SequenceBatch batch = data_->training_batch(next);
  optimizer_->zero_grad();
  StepResult result;
  if (group_->size() == 1) {
    const Tensor loss = model_->loss(batch);
    loss.backward();
    result.loss = loss.item();
  } else {
    backward_share(batch, result);
  }
  result.grad_norm =
      clip_grad_norm(model_->parameters(), options_.clip_norm > 0 ? options_.clip_norm : INFINITY);
  if (!std::isfinite(result.loss) || !std::isfinite(result.grad_norm)) {
    // Stop before the update, so the parameters stay those of the last good step.
    throw NonFiniteLoss("loss " + std::to_string(result.loss) + " (gradient norm " +
                        std::to_string(result.grad_norm) + ") at step " + std::to_string(next));
  }
  result.lr = learning_rate(options_.schedule, next);
  result.tokens = static_cast<int64_t>(batch.source.values.size() + batch.inputs.values.size());
  optimizer_->step(result.lr);
  step_ = next;
  last_loss_ = result.loss;
  return result;
}

Metrics Trainer::evaluate() {
  NoGradGuard no_grad;
  model_->eval();
  Tally t;
  const auto [begin, end] = share_of(heldout_.targets.shape[0], *group_);
  for (int64_t start = begin; start < end; start += options_.eval_batch_size) {
    const nn::SequenceBatch chunk =
        rows_of(heldout_, start, std::min(options_.eval_batch_size, end - start));
    tally(model_->forward(chunk), chunk.targets, t);
  }
  model_->train();
  if (group_->size() > 1) {
    std::array<double, 5> sums = {static_cast<double>(t.rows), static_cast<double>(t.counted),
                                  static_cast<double>(t.correct), static_cast<double>(t.exact),
                                  t.loss_sum};
    group_->sum(sums);
    t = {static_cast<int64_t>(sums[0]), static_cast<int64_t>(sums[1]),
         static_cast<int64_t>(sums[2]), static_cast<int64_t>(sums[3]), sums[4]};
  }
  Metrics m;
  m.loss = t.counted ? t.loss_sum / static_cast<double>(t.counted) : 0;
  m.token_accuracy = t.counted ? static_cast<double>(t.correct) / t.counted : 0;
  m.exact_match = t.rows ? static_cast<double>(t.exact) / t.rows : 0;
  return m;
}

void Trainer::distribute(ProcessGroup& group) {
  const int64_t rows = data_->training_batch(1).targets.shape[0];
  if (group.size() > rows) {
    throw ConfigError("--batch-size " + std::to_string(rows) + " is smaller than the " +
                      std::to_string(group.size()) +
                      " processes training it: every process needs a row of each batch");
  }
  for (const auto& [name, p] : model_->named_parameters()) {
    if (p.dtype() != DType::Float32) {
      throw ConfigError("training on several processes needs float32 parameters; " + name + " is " +
                        dtype_name(p.dtype()));
    }
  }
  group_ = &group;
}

void Trainer::backward_share(const nn::SequenceBatch& batch, StepResult& result) {
  const auto [begin, end] = share_of(batch.targets.shape[0], *group_);
  const nn::SequenceBatch share = rows_of(batch, begin, end - begin);
  const int64_t counted = counted_targets(batch.targets);
  const double weight =
      counted > 0 ? static_cast<double>(counted_targets(share.targets)) / counted : 0;
  // This process's masks come from its own stream, seeded by the shared generator's next draw
  // and the rank; the shared generator itself only moves on by that draw, on every process.
  Generator& dropout = *model_->dropout_gen;
  Generator shared = dropout;
  const uint64_t draw = shared.next_u64();
  dropout = Generator(draw + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(group_->rank() + 1));
  double loss_part = 0;
  if (weight > 0) {
    const Tensor loss = model_->loss(share) * weight;
    loss.backward();
    loss_part = loss.item();
  }
  dropout = shared;
  const auto start = std::chrono::steady_clock::now();
  sum_gradients();
  group_->sum(std::span<double>(&loss_part, 1));
  result.sync_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.loss = loss_part;
}

void Trainer::sum_gradients() {
  std::vector<Tensor> params = model_->parameters();
  size_t total = 0;
  for (const Tensor& p : params) total += static_cast<size_t>(p.numel());
  gradient_buffer_.resize(total);
  float* flat = gradient_buffer_.data();
  for (const Tensor& p : params) {
    const Tensor grad = p.grad();
    if (grad.defined()) {
      std::copy_n(grad.data<float>(), p.numel(), flat);
    } else {
      std::fill_n(flat, p.numel(), 0.0f);
    }
    flat += p.numel();
  }
  // A few large messages rather than one per parameter: each all-reduce pays a latency.
  constexpr size_t kBucket = size_t{1} << 22;
  for (size_t start = 0; start < total; start += kBucket) {
    group_->sum(
        std::span<float>(gradient_buffer_.data() + start, std::min(kBucket, total - start)));
  }
  flat = gradient_buffer_.data();
  for (Tensor& p : params) {
    Tensor grad = Tensor::empty(p.shape());
    std::copy_n(flat, p.numel(), grad.mutable_data<float>());
    p.set_grad(grad);
    flat += p.numel();
  }
}

uint64_t Trainer::state_hash() const {
  uint64_t hash = hash_tensors(model_->named_parameters(), data::kFingerprintStart);
  hash = hash_tensors(optimizer_->state(), hash);
  const std::array<int64_t, 2> steps = {step_, optimizer_->steps()};
  hash = data::fingerprint(steps.data(), sizeof steps, hash);
  const auto dropout = model_->dropout_gen->state();
  return data::fingerprint(dropout.data(), sizeof dropout, hash);
}

void Trainer::check_replicas() {
  const std::vector<uint64_t> hashes = group_->gather(state_hash());
  std::string differ;
  for (size_t r = 1; r < hashes.size(); ++r) {
    if (hashes[r] != hashes[0]) differ += (differ.empty() ? "" : ", ") + std::to_string(r);
  }
  if (!differ.empty()) {
    throw ReplicaMismatch(
        "after step " + std::to_string(step_) + " the model or optimizer state of rank" +
        (differ.find(',') == std::string::npos ? " " : "s ") + differ + " differs from rank 0's");
  }
}

bool Trainer::record_metric(double metric) {
  // best_step_ 0 means no evaluation yet: a negated loss is below the stored -1 placeholder.
  // Written as "not better" so that a NaN score never replaces a best one.
  if (best_step_ != 0 && !(metric > best_metric_)) return false;
  best_metric_ = metric;
  best_step_ = step_;
  return true;
}

CheckpointData Trainer::checkpoint() const {
  CheckpointData data;
  data.config = options_.config;
  data.model = model_->named_parameters();
  data.optimizer_step = optimizer_->steps();
  data.optimizer_state = optimizer_->state();
  data.train = {.step = step_,
                .data_seed = options_.data_seed,
                .dropout_rng = model_->dropout_gen->state(),
                .best_metric = best_metric_,
                .best_step = best_step_,
                .loss = last_loss_};
  return data;
}

void Trainer::restore(const CheckpointData& data, const std::string& path) {
  require_finite(data, path);
  std::vector<nn::NamedTensor> params = model_->named_parameters();
  std::vector<Tensor> backup;
  for (const auto& [_, p] : params) backup.push_back(p.clone());
  try {
    restore_tensors(path, kModelGroup, data.model, params);
    restore_tensors(path, kOptimizerGroup, data.optimizer_state, optimizer_->state());
  } catch (...) {
    // The optimizer's state did not fit after the parameters were copied: undo them too.
    for (size_t i = 0; i < params.size(); ++i) params[i].second.copy_from(backup[i]);
    throw;
  }
  optimizer_->set_steps(data.optimizer_step);
  step_ = data.train.step;
  model_->dropout_gen->set_state(data.train.dropout_rng);
  best_metric_ = data.train.best_metric;
  best_step_ = data.train.best_step;
  last_loss_ = data.train.loss;
}

namespace {

std::shared_ptr<const DataSource> data_source(const RunConfig& config,
                                              std::shared_ptr<const nn::SequenceModel> model,
                                              std::shared_ptr<const data::TextCorpus> corpus) {
  if (config.task.name != "text") {
    return std::make_shared<TaskData>(config.task, std::move(model), config.seed, config.batch_size,
                                      config.eval_size);
  }
  if (!corpus) {
    RunConfig with_vocabulary = config;
    corpus = load_text_corpus(with_vocabulary);
  }
  return std::make_shared<TextData>(
      std::move(corpus), std::move(model), config.seed, config.batch_size, config.context,
      config.eval_full ? TextData::Heldout::ValidationSplit : TextData::Heldout::Windows,
      config.eval_iters);
}

// The configuration a checkpoint was written with, checked as a new run's would be.
RunConfig checkpoint_config(const std::vector<ConfigEntry>& entries, const std::string& path) {
  RunConfig config = from_entries(entries, path);
  try {
    finalize(config);
  } catch (const ConfigError& e) {
    throw CheckpointError(path + ": /config: " + e.what());
  }
  return config;
}

}  // namespace

LoadedRun load_run(const std::string& checkpoint_path, const std::string& text) {
  LoadedRun run{checkpoint_config(read_checkpoint_config(checkpoint_path), checkpoint_path),
                nullptr};
  if (!text.empty()) {
    if (run.config.task.name != "text") {
      throw ConfigError(checkpoint_path + ": a " + run.config.task.name +
                        " model, not a language model: --data applies to text checkpoints");
    }
    const auto model = nn::make_sequence_model(run.config.model, run.config.net);
    const auto corpus = std::make_shared<data::TextCorpus>(
        text, data::Vocabulary::deserialize(run.config.tokenizer, run.config.vocabulary),
        run.config.val_fraction);
    run.trainer = std::make_unique<Trainer>(
        model, make_optimizer(run.config.optimizer, model->named_parameters()),
        std::make_shared<TextData>(corpus, model, run.config.seed, run.config.batch_size,
                                   run.config.context, TextData::Heldout::WholeFile, 0),
        options_of(run.config));
  } else {
    run.trainer = std::make_unique<Trainer>(run.config);
  }
  // The tensors are read once the model they belong to exists, so that a file whose names or
  // shapes do not fit it is refused before a value is allocated.
  const CheckpointData live = run.trainer->checkpoint();
  run.trainer->restore(read_checkpoint(checkpoint_path, {live.model, live.optimizer_state}),
                       checkpoint_path);
  return run;
}

LoadedModel load_model(const std::string& checkpoint_path) {
  LoadedModel loaded{checkpoint_config(read_checkpoint_config(checkpoint_path), checkpoint_path),
                     nullptr};
  loaded.model = nn::make_sequence_model(loaded.config.model, loaded.config.net);
  const CheckpointData data =
      read_checkpoint(checkpoint_path, {loaded.model->named_parameters(), std::nullopt});
  require_finite(data, checkpoint_path);
  restore_tensors(checkpoint_path, kModelGroup, data.model, loaded.model->named_parameters());
  loaded.model->dropout_gen->set_state(data.train.dropout_rng);
  return loaded;
}

}  // namespace gradlab::train
