// Trainer: a SequenceModel, its optimizer and its data, and the operations on them: a training
// step, a held-out evaluation, and conversion to and from checkpoints. `train::fit` (fit.h)
// runs the loop around it. Any SequenceModel and any DataSource will do; the command line's
// runs are built from a RunConfig (a built-in task and the factory's model).
#pragma once

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/data_source.h"
#include "data/sequence_task.h"
#include "data/task.h"
#include "data/text_task.h"
#include "nn/sequence_model.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/optimizer.h"
#include "train/process_group.h"

namespace gradlab::train {

// The data sources live in data/ (data/data_source.h, data/sequence_task.h, data/text_task.h);
// these names keep the programs written against train:: working.
using data::DataSource;
using data::load_text_corpus;
using data::TaskData;
using data::TextData;

// Teacher-forced scores of a set of sequences.
struct Scores {
  double loss = 0;
  double token_accuracy = 0;  // counted positions whose argmax is the target
  double exact_match = 0;     // sequences with every counted position right
};

// The loss of one part of the held-out targets (DataSource::heldout_parts).
struct PartLoss {
  std::string name;  // "second_copy"
  double loss = 0;
};

// An evaluation: the held-out set's scores, and for a task with a finite training set
// (DataSource::training_set) the training set's, scored the same way: the gap between the two
// over time is what a grokking run shows. parts: the loss of each of the held-out set's parts,
// in their order (induction: the first and the second copy).
struct Metrics : Scores {
  std::optional<Scores> train;
  std::vector<PartLoss> parts;
};

// A run that diverged: nothing from its state may be saved (train::fit's rules, fit.h).
struct Divergence : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The loss or the gradient norm of a step was NaN or infinite; the step was not applied.
struct NonFiniteLoss : Divergence {
  using Divergence::Divergence;
};

// The processes of a group no longer hold the same model and optimizer state.
struct ReplicaMismatch : Divergence {
  using Divergence::Divergence;
};

struct StepResult {
  double loss = 0;
  double grad_norm = 0;  // global gradient norm before clipping
  double lr = 0;
  int64_t tokens = 0;  // tokens the model read (source and inputs)
  // Seconds this process spent summing the gradients across its group (waiting for the
  // slowest process included); 0 for one process.
  double sync_seconds = 0;
};

// A training step splits its batch (a process's share of it, in a group) into this many shares
// of rows, fewer when it has fewer rows, and computes the gradients of each apart, on threads of
// their own when there are threads (set_threads): the shares' gradients are then summed in share
// order, so that a run's numbers are the same on any number of threads. Data parallel on
// threads, as on processes: one sum per step instead of a parallel region per op. Threads beyond
// the shares work inside each share's ops.
inline constexpr int64_t kBatchShares = 2;

struct TrainerOptions {
  ScheduleConfig schedule;
  double clip_norm = 1.0;        // 0: no clipping
  int64_t eval_batch_size = 64;  // held-out rows per forward pass
  uint64_t data_seed = 0;        // recorded in checkpoints
  // Written to a checkpoint's /config: what rebuilds the run (see config.h's to_entries).
  std::vector<ConfigEntry> config;
};

class Trainer {
 public:
  Trainer(std::shared_ptr<nn::SequenceModel> model, std::unique_ptr<Optimizer> optimizer,
          std::shared_ptr<const DataSource> data, TrainerOptions options);
  // The run a RunConfig describes; config must have been through finalize(). `task` is its
  // task (prepare_task in config.h, which has read a text run's file), or null to build it
  // from config (a text run then reads its file here).
  explicit Trainer(const RunConfig& config, std::shared_ptr<const data::Task> task = nullptr);

  nn::SequenceModel& model() { return *model_; }
  int64_t step() const { return step_; }

  // Trains and evaluates as one process of `group` (data parallel; process_group.h): every
  // process draws the same global batch, computes the gradients of its share of its rows (as
  // equal as can be, the first processes one row more when the batch does not divide), and the
  // gradients are summed, each share's loss weighted by its part of the batch's counted targets,
  // so that every process applies the step one process would (each process cuts its share into
  // kBatchShares, as one process does its batch). Dropout masks come from a stream of each
  // share's own; the generator a checkpoint keeps moves on alike everywhere.
  // Evaluation splits the held-out rows the same way. Throws ConfigError if the batch has fewer
  // rows than the group has processes.
  void distribute(ProcessGroup& group);
  ProcessGroup& group() const { return *group_; }
  // A hash of everything a step changes (parameters, optimizer state, step counts, the dropout
  // generator): equal on every process of a group while they agree.
  uint64_t state_hash() const;
  // Throws ReplicaMismatch, naming the processes, unless every process of the group holds the
  // same state (state_hash). A collective: every process must call it.
  void check_replicas();

  // One optimizer step on batch number step() + 1 of the data stream. Throws NonFiniteLoss
  // (without updating anything) if the loss or the gradients are not finite.
  StepResult train_step();
  // Teacher-forced metrics on the fixed held-out set, and on the training set when the data has
  // a finite one, in evaluation mode.
  Metrics evaluate();
  // The held-out set evaluate() reads, whole (every process's share).
  const nn::SequenceBatch& heldout() const { return heldout_; }

  double best_metric() const { return best_metric_; }
  int64_t best_step() const { return best_step_; }
  // Updates the best so far with an evaluation's score (higher is better; fit passes the exact
  // match, or the negated loss). True when the score is the new best (always at the first).
  bool record_metric(double metric);

  // The running level of the loss fit's loss-spike rule keeps (TrainState::loss_level): saved
  // and restored with the rest of the state, so that a resumed run carries it on.
  double loss_level() const { return loss_level_; }
  void set_loss_level(double level) { loss_level_ = level; }

  CheckpointData checkpoint() const;
  // Restores model, optimizer and loop state from a checkpoint written for this run.
  void restore(const CheckpointData& data, const std::string& path);
  // Reads the checkpoint at path and restores it, the names and shapes of its every tensor
  // checked against this trainer's before the first value is read: a checkpoint that does not
  // fit throws CheckpointError naming the tensor, and nothing is loaded.
  void restore(const std::string& path);

 private:
  Trainer(std::shared_ptr<nn::SequenceModel> model, const RunConfig& config,
          std::shared_ptr<const data::Task> task);
  // backward() of this process's share of the batch in kBatchShares shares, the gradients then
  // summed (in share order, then across the group); fills the whole batch's loss and the time
  // of the sums across the group into `result`.
  void backward_shares(const nn::SequenceBatch& batch, StepResult& result);
  // Replaces every parameter's gradient by its sum over the group.
  void sum_gradients();
  // The scores of `set`, each process scoring its share of the rows (evaluation mode is set),
  // and the loss of each of parts (targets of set's shape) from the same forward passes.
  Scores score(const nn::SequenceBatch& set, const std::vector<data::TargetPart>& parts = {},
               std::vector<PartLoss>* part_losses = nullptr);

  std::shared_ptr<nn::SequenceModel> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::shared_ptr<const DataSource> data_;
  TrainerOptions options_;
  nn::SequenceBatch heldout_;
  std::optional<nn::SequenceBatch> training_set_;  // DataSource::training_set
  std::vector<data::TargetPart> heldout_parts_;    // DataSource::heldout_parts
  int64_t step_ = 0;
  double best_metric_ = -1;
  int64_t best_step_ = 0;
  double last_loss_ = std::numeric_limits<double>::quiet_NaN();   // of step step_
  double loss_level_ = std::numeric_limits<double>::quiet_NaN();  // TrainState::loss_level
  ProcessGroup* group_;
  std::vector<float> gradient_buffer_;  // the gradients summed across the group, flat
};

// A checkpoint's /config as a run's configuration, checked as a new run's would be; throws
// CheckpointError naming the file.
RunConfig checkpoint_run_config(const std::string& path);

// Throws CheckpointError, naming the file, the tensor and the task's vocabulary, when a tensor
// of the checkpoint at path has another number of rows than the vocabulary its /config gives
// (a text's characters, a toy task's symbols) where `model`, built from that config, has one
// row per token: the file is inconsistent. Reads no tensor value; a loader calls it before it
// reads a data file, so that the file, not the data, is blamed.
void require_vocabulary_rows(const std::string& path, const RunConfig& config,
                             const nn::SequenceModel& model);

// A run rebuilt from a checkpoint: its configuration, and a trainer holding its parameters,
// optimizer and loop state. Throws CheckpointError naming the file and the item if anything is
// missing or mismatched. A language model reads its data file, or `text` instead when given,
// whose every token is then the held-out set (to score a model on any text; ConfigError for a
// task that is not a language model).
struct LoadedRun {
  RunConfig config;
  std::unique_ptr<Trainer> trainer;
};
LoadedRun load_run(const std::string& checkpoint_path, const std::string& text = "");

// A checkpoint's model alone, parameters restored (no optimizer, no data file): for generation.
struct LoadedModel {
  RunConfig config;
  std::shared_ptr<nn::SequenceModel> model;
};
LoadedModel load_model(const std::string& checkpoint_path);

}  // namespace gradlab::train
