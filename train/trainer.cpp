// The training step, evaluation and decoding for both model kinds.
#include "train/trainer.h"

#include <cmath>

#include "autograd/ops.h"

namespace gradlab::train {
namespace {

ModelBatch from(const data::Batch& b) {
  return {{}, b.inputs, b.targets};
}
ModelBatch from(const data::Seq2SeqBatch& b) {
  return {b.source, b.target_in, b.target_out};
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

}  // namespace

Trainer::Trainer(const RunConfig& config) : config_(config), task_(config.task) {
  if (config_.model == "decoder") {
    decoder_ = std::make_shared<nn::DecoderLM>(config_.net);
    module_ = decoder_.get();
    dropout_gen_ = decoder_->dropout_gen;
    heldout_ = from(task_.heldout(config_.seed, config_.eval_size));
  } else {
    seq2seq_ = std::make_shared<nn::EncoderDecoder>(config_.net);
    module_ = seq2seq_.get();
    dropout_gen_ = seq2seq_->dropout_gen;
    heldout_ = from(task_.seq2seq_heldout(config_.seed, config_.eval_size));
  }
  optimizer_ = make_optimizer(config_.optimizer, module_->named_parameters());
}

ModelBatch Trainer::training_batch(int64_t step) const {
  if (decoder_) return from(task_.batch(config_.seed, step, config_.batch_size));
  return from(task_.seq2seq_batch(config_.seed, step, config_.batch_size));
}

Tensor Trainer::forward(const ModelBatch& batch, std::vector<Tensor>* attention) {
  if (decoder_) return decoder_->forward(batch.inputs, attention);
  return seq2seq_->forward(batch.source, batch.inputs, attention);
}

StepResult Trainer::train_step() {
  module_->train();
  const int64_t next = step_ + 1;
  const ModelBatch batch = training_batch(next);
  optimizer_->zero_grad();
  const Tensor loss = cross_entropy(forward(batch), batch.targets, data::kIgnore);
  loss.backward();
  StepResult result;
  result.loss = loss.item();
  result.grad_norm =
      clip_grad_norm(module_->parameters(), config_.clip_norm > 0 ? config_.clip_norm : INFINITY);
  if (!std::isfinite(result.loss) || !std::isfinite(result.grad_norm)) {
    // Stop before the update, so the parameters stay those of the last good step.
    throw NonFiniteLoss("loss " + std::to_string(result.loss) + " (gradient norm " +
                        std::to_string(result.grad_norm) + ") at step " + std::to_string(next));
  }
  result.lr = learning_rate(config_.schedule, next);
  optimizer_->step(result.lr);
  step_ = next;
  return result;
}

void Trainer::tally(const Tensor& logits, const Indices& targets, Tally& t) {
  const Tensor probs = logits.to(DType::Float32);
  const int64_t rows = targets.shape[0], length = targets.shape[1], vocab = logits.size(-1);
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    bool all_right = true;
    for (int64_t i = 0; i < length; ++i) {
      const int64_t target = targets.values[r * length + i];
      if (target == data::kIgnore) continue;
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
  t.loss_sum += cross_entropy(logits, targets, data::kIgnore).item() * static_cast<double>(counted);
}

Metrics Trainer::evaluate() {
  NoGradGuard no_grad;
  module_->eval();
  // In chunks of the training batch size: the same buffer sizes as a training step, so the
  // storage pool serves them and peak memory stays that of training.
  Tally t;
  const int64_t rows = heldout_.targets.shape[0];
  for (int64_t start = 0; start < rows; start += config_.batch_size) {
    const int64_t count = std::min(config_.batch_size, rows - start);
    const ModelBatch chunk{rows_of(heldout_.source, start, count),
                           rows_of(heldout_.inputs, start, count),
                           rows_of(heldout_.targets, start, count)};
    tally(forward(chunk), chunk.targets, t);
  }
  module_->train();
  Metrics m;
  m.loss = t.counted ? t.loss_sum / static_cast<double>(t.counted) : 0;
  m.token_accuracy = t.counted ? static_cast<double>(t.correct) / t.counted : 0;
  m.exact_match = t.rows ? static_cast<double>(t.exact) / t.rows : 0;
  return m;
}

std::vector<int64_t> Trainer::greedy_answer(const std::vector<int64_t>& prompt) {
  task_.validate_prompt(prompt);
  NoGradGuard no_grad;
  module_->eval();
  std::vector<int64_t> answer;
  const int64_t vocab = task_.vocab_size();
  if (decoder_) {
    std::vector<int64_t> sequence = prompt;
    sequence.push_back(data::kSeparator);
    for (int64_t i = 0; i < task_.answer_length(); ++i) {
      const int64_t length = static_cast<int64_t>(sequence.size());
      const Tensor logits = decoder_->forward(Indices({1, length}, sequence)).to(DType::Float32);
      sequence.push_back(argmax_row(logits.data<float>(), length - 1, vocab));
      answer.push_back(sequence.back());
    }
  } else {
    const int64_t source_length = static_cast<int64_t>(prompt.size());
    const Tensor memory = seq2seq_->encode(Indices({1, source_length}, prompt));
    std::vector<int64_t> target{data::kSeparator};
    for (int64_t i = 0; i < task_.answer_length(); ++i) {
      const int64_t length = static_cast<int64_t>(target.size());
      const Tensor logits =
          seq2seq_->decode(memory, Indices({1, length}, target)).to(DType::Float32);
      answer.push_back(argmax_row(logits.data<float>(), length - 1, vocab));
      target.push_back(answer.back());
    }
  }
  module_->train();
  return answer;
}

void Trainer::record_metric(double metric) {
  if (metric > best_metric_) {
    best_metric_ = metric;
    best_step_ = step_;
  }
}

CheckpointData Trainer::checkpoint() const {
  CheckpointData data;
  data.config = to_entries(config_);
  data.model = module_->named_parameters();
  data.optimizer_step = optimizer_->steps();
  data.optimizer_state = optimizer_->state();
  data.train = {.step = step_,
                .data_seed = config_.seed,
                .dropout_rng = dropout_gen_->state(),
                .best_metric = best_metric_,
                .best_step = best_step_};
  return data;
}

void Trainer::restore(const CheckpointData& data, const std::string& path) {
  std::vector<nn::NamedTensor> params = module_->named_parameters();
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
  dropout_gen_->set_state(data.train.dropout_rng);
  best_metric_ = data.train.best_metric;
  best_step_ = data.train.best_step;
}

std::unique_ptr<Trainer> load_trainer(const std::string& checkpoint_path) {
  const CheckpointData data = read_checkpoint(checkpoint_path);
  RunConfig config = from_entries(data.config, checkpoint_path);
  try {
    finalize(config);
  } catch (const ConfigError& e) {
    throw CheckpointError(checkpoint_path + ": /config: " + e.what());
  }
  auto trainer = std::make_unique<Trainer>(config);
  trainer->restore(data, checkpoint_path);
  return trainer;
}

}  // namespace gradlab::train
