// Trainer: the model, optimizer and data of one run, and the operations on them: a training
// step, a held-out evaluation, greedy decoding, and conversion to and from checkpoints. The
// command-line loop around it (progress, files, signals) is in cmd_train.cpp.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "train/config.h"

namespace gradlab::train {

// A batch as either model consumes it: the decoder reads `inputs`; the encoder-decoder reads
// `source` (encoder) and `inputs` (decoder, teacher-forced). Targets are kIgnore where the
// loss does not count.
struct ModelBatch {
  Indices source;   // [B, S], empty for the decoder-only model
  Indices inputs;   // [B, T]
  Indices targets;  // [B, T]
};

struct Metrics {
  double loss = 0;
  double token_accuracy = 0;  // counted positions whose argmax is the target
  double exact_match = 0;     // sequences with every counted position right
};

// The loss or the gradient norm of a step was NaN or infinite; the step was not applied.
struct NonFiniteLoss : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct StepResult {
  double loss = 0;
  double grad_norm = 0;  // global gradient norm before clipping
  double lr = 0;
};

class Trainer {
 public:
  // config must have been through finalize().
  explicit Trainer(const RunConfig& config);

  const RunConfig& config() const { return config_; }
  const data::Task& task() const { return task_; }
  nn::Module& module() { return *module_; }
  int64_t step() const { return step_; }

  // One optimizer step on batch number step() + 1 of the data stream. Throws NonFiniteLoss
  // (without updating anything) if the loss or the gradients are not finite.
  StepResult train_step();
  // Teacher-forced metrics on the fixed held-out set, in evaluation mode.
  Metrics evaluate();
  // Logits [B, T, V] for a batch (no_grad or not, as the caller sets).
  Tensor forward(const ModelBatch& batch, std::vector<Tensor>* attention = nullptr);
  // Greedy autoregressive answer for a prompt (not teacher forced).
  std::vector<int64_t> greedy_answer(const std::vector<int64_t>& prompt);

  double best_metric() const { return best_metric_; }
  int64_t best_step() const { return best_step_; }
  void record_metric(double metric);  // updates the best so far

  CheckpointData checkpoint() const;
  // Restores model, optimizer and loop state from a checkpoint written for this config.
  void restore(const CheckpointData& data, const std::string& path);

 private:
  ModelBatch training_batch(int64_t step) const;
  // Counts over held-out chunks.
  struct Tally {
    int64_t rows = 0, counted = 0, correct = 0, exact = 0;
    double loss_sum = 0;
  };
  static void tally(const Tensor& logits, const Indices& targets, Tally& t);

  RunConfig config_;
  data::Task task_;
  std::shared_ptr<nn::DecoderLM> decoder_;
  std::shared_ptr<nn::EncoderDecoder> seq2seq_;
  nn::Module* module_ = nullptr;
  std::shared_ptr<Generator> dropout_gen_;
  std::unique_ptr<Optimizer> optimizer_;
  ModelBatch heldout_;
  int64_t step_ = 0;
  double best_metric_ = -1;
  int64_t best_step_ = 0;
};

// A trainer rebuilt from a checkpoint: its configuration, parameters, optimizer and loop state.
// Throws CheckpointError naming the file and the item if anything is missing or mismatched.
std::unique_ptr<Trainer> load_trainer(const std::string& checkpoint_path);

}  // namespace gradlab::train
