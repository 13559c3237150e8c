// The training step and evaluation of any SequenceModel, and the runs built from a RunConfig.
#include "train/trainer.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "autograd/format.h"
#include "autograd/ops.h"
#include "data/tasks.h"
#include "train/batch_rows.h"
#include "train/share_threads.h"

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

// Counts over the chunks of a scored set.
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

void add(Tally& sum, const Tally& t) {
  sum.rows += t.rows;
  sum.counted += t.counted;
  sum.correct += t.correct;
  sum.exact += t.exact;
  sum.loss_sum += t.loss_sum;
}

TrainerOptions options_of(const RunConfig& config) {
  return {.schedule = config.schedule,
          .clip_norm = config.clip_norm,
          // The training batch size: the same buffer sizes as a training step, so the storage
          // pool serves them and peak memory stays that of training.
          .eval_batch_size = batch_rows(config),
          .data_seed = config.seed,
          .config = to_entries(config)};
}

}  // namespace

Trainer::Trainer(std::shared_ptr<nn::SequenceModel> model, std::unique_ptr<Optimizer> optimizer,
                 std::shared_ptr<const DataSource> data, TrainerOptions options)
    : model_(std::move(model)),
      optimizer_(std::move(optimizer)),
      data_(std::move(data)),
      options_(std::move(options)),
      heldout_(data_->heldout()),
      training_set_(data_->training_set()),
      heldout_parts_(data_->heldout_parts()),
      group_(&alone()) {
  options_.config = program_entries(*model_, options_.config);
}

Trainer::Trainer(const RunConfig& config, std::shared_ptr<const data::Task> task)
    : Trainer(nn::make_sequence_model(config.model, config.net), config,
              task ? std::move(task) : make_task(config)) {}

Trainer::Trainer(std::shared_ptr<nn::SequenceModel> model, const RunConfig& config,
                 std::shared_ptr<const data::Task> task)
    : Trainer(model, make_optimizer(config.optimizer, model->named_parameters()),
              task->data_source(model, config.seed, config.batch_size, config.eval_size),
              options_of(config)) {}

StepResult Trainer::train_step() {
  model_->train();
  const int64_t next = step_ + 1;
  const nn::SequenceBatch batch = data_->training_batch(next);
  optimizer_->zero_grad();
  StepResult result;
  backward_shares(batch, result);
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
  Metrics m;
  static_cast<Scores&>(m) = score(heldout_, heldout_parts_, &m.parts);
  if (training_set_) m.train = score(*training_set_);
  model_->train();
  return m;
}

Scores Trainer::score(const nn::SequenceBatch& set, const std::vector<data::TargetPart>& parts,
                      std::vector<PartLoss>* part_losses) {
  const auto [begin, end] = share_of(nn::rows_in(set), *group_);
  const int64_t chunk_rows = options_.eval_batch_size;
  const int64_t chunks = (end - begin + chunk_rows - 1) / chunk_rows;
  // Each chunk's tally, then each part's: added up in chunk order, whichever thread scored which.
  std::vector<std::vector<Tally>> chunk_tallies(static_cast<size_t>(chunks),
                                                std::vector<Tally>(1 + parts.size()));
  run_pieces(chunks, [&](int64_t c) {
    const NoGradGuard no_grad;  // grad mode is the thread's own
    const int64_t start = begin + c * chunk_rows;
    const int64_t rows = std::min(chunk_rows, end - start);
    const nn::SequenceBatch chunk = nn::rows_of(set, start, rows);
    std::vector<Tally>& out = chunk_tallies[static_cast<size_t>(c)];
    if (chunk.features.defined()) {
      // A model of feature vectors has no tokens to count: its own loss, as a mean per row.
      out[0] = {rows, rows, 0, 0, model_->loss(chunk).item() * static_cast<double>(rows)};
      return;
    }
    const Tensor logits = model_->forward(chunk);
    tally(logits, chunk.targets, out[0]);
    for (size_t p = 0; p < parts.size(); ++p) {
      tally(logits, nn::rows_of({{}, {}, parts[p].targets}, start, rows).targets, out[1 + p]);
    }
  });
  Tally t;
  std::vector<Tally> part_tallies(parts.size());
  for (const std::vector<Tally>& chunk : chunk_tallies) {
    add(t, chunk[0]);
    for (size_t p = 0; p < parts.size(); ++p) add(part_tallies[p], chunk[1 + p]);
  }
  if (group_->size() > 1) {
    std::vector<double> sums = {static_cast<double>(t.rows), static_cast<double>(t.counted),
                                static_cast<double>(t.correct), static_cast<double>(t.exact),
                                t.loss_sum};
    for (const Tally& part : part_tallies) {
      sums.insert(sums.end(), {static_cast<double>(part.counted), part.loss_sum});
    }
    group_->sum(sums);
    t = {static_cast<int64_t>(sums[0]), static_cast<int64_t>(sums[1]),
         static_cast<int64_t>(sums[2]), static_cast<int64_t>(sums[3]), sums[4]};
    for (size_t p = 0; p < part_tallies.size(); ++p) {
      part_tallies[p].counted = static_cast<int64_t>(sums[5 + 2 * p]);
      part_tallies[p].loss_sum = sums[6 + 2 * p];
    }
  }
  const auto mean_loss = [](const Tally& tally) {
    return tally.counted ? tally.loss_sum / static_cast<double>(tally.counted) : 0;
  };
  Scores s;
  s.loss = mean_loss(t);
  s.token_accuracy = t.counted ? static_cast<double>(t.correct) / t.counted : 0;
  s.exact_match = t.rows ? static_cast<double>(t.exact) / t.rows : 0;
  if (part_losses) {
    for (size_t p = 0; p < parts.size(); ++p) {
      part_losses->push_back({parts[p].name, mean_loss(part_tallies[p])});
    }
  }
  return s;
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
                .loss = last_loss_,
                .loss_level = loss_level_};
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
  loss_level_ = data.train.loss_level;
}

void Trainer::restore(const std::string& path) {
  const CheckpointData live = checkpoint();
  restore(read_checkpoint(path, {live.model, live.optimizer_state}), path);
}

RunConfig checkpoint_run_config(const std::string& path) {
  RunConfig config = from_entries(read_checkpoint_config(path), path);
  try {
    finalize(config);
  } catch (const ConfigError& e) {
    throw CheckpointError(path + ": /config: " + e.what());
  }
  return config;
}

void require_vocabulary_rows(const std::string& path, const RunConfig& config,
                             const nn::SequenceModel& model) {
  const int64_t vocabulary = config.net.vocab_size;
  std::map<std::string, Shape> stored;
  for (const auto& [name, shape] : read_model_shapes(path)) stored.emplace(name, shape);
  for (const auto& [name, tensor] : model.named_parameters()) {
    const auto found = stored.find(name);
    const Shape& live = tensor.shape();
    if (found == stored.end() || found->second.size() != live.size()) continue;
    // The one axis where the stored shape differs must be a vocabulary axis of the model's.
    int differing = -1, count = 0;
    for (size_t axis = 0; axis < live.size(); ++axis) {
      if (found->second[axis] != live[axis]) {
        differing = static_cast<int>(axis);
        ++count;
      }
    }
    if (count != 1 || live[static_cast<size_t>(differing)] != vocabulary) continue;
    throw CheckpointError(path + ": " + kModelGroup + "/" + name + " has " +
                          format_number(found->second[static_cast<size_t>(differing)]) +
                          " tokens on axis " + format_number(differing) + " but /config gives " +
                          make_task(config)->vocabulary_flag() + " (" + format_number(vocabulary) +
                          " tokens): the checkpoint is inconsistent");
  }
}

LoadedRun load_run(const std::string& checkpoint_path, const std::string& text) {
  LoadedRun run{checkpoint_run_config(checkpoint_path), nullptr};
  if (data::task_kind(run.config.task.name).own_data) {
    throw ConfigError(checkpoint_path +
                      ": trained on a program's own data, which is not in the file: no held-out "
                      "set to score nor batches to resume (the program can: Trainer::evaluate)");
  }
  const auto model = nn::make_sequence_model(run.config.model, run.config.net);
  require_vocabulary_rows(checkpoint_path, run.config, *model);  // before a data file is read
  if (!text.empty()) {
    const std::shared_ptr<data::Task> task = make_task(run.config);
    const data::LanguageModelTask* language_model = task->language_model();
    if (!language_model) {
      throw ConfigError(checkpoint_path + ": a " + task->name() +
                        " model, not a language model: --data applies to language models");
    }
    run.trainer = std::make_unique<Trainer>(
        model, make_optimizer(run.config.optimizer, model->named_parameters()),
        language_model->file_source(text, model, run.config.seed, run.config.batch_size),
        options_of(run.config));
  } else {
    const std::shared_ptr<const data::Task> task = make_task(run.config);
    run.trainer = std::make_unique<Trainer>(
        model, make_optimizer(run.config.optimizer, model->named_parameters()),
        task->data_source(model, run.config.seed, run.config.batch_size, run.config.eval_size),
        options_of(run.config));
  }
  // The tensors are read once the model they belong to exists, so that a file whose names or
  // shapes do not fit it is refused before a value is allocated.
  run.trainer->restore(checkpoint_path);
  return run;
}

LoadedModel load_model(const std::string& checkpoint_path) {
  LoadedModel loaded{checkpoint_run_config(checkpoint_path), nullptr};
  loaded.model = nn::make_sequence_model(loaded.config.model, loaded.config.net);
  require_vocabulary_rows(checkpoint_path, loaded.config, *loaded.model);
  const CheckpointData data =
      read_checkpoint(checkpoint_path, {loaded.model->named_parameters(), std::nullopt});
  require_finite(data, checkpoint_path);
  restore_tensors(checkpoint_path, kModelGroup, data.model, loaded.model->named_parameters());
  loaded.model->dropout_gen->set_state(data.train.dropout_rng);
  return loaded;
}

}  // namespace gradlab::train
