// RunConfig: everything that defines a training run (model, task, optimizer, schedule, loop),
// its validation, and its round trip through a checkpoint's /config attributes and a config
// file. One table of fields (`config_fields`) names every hyperparameter once; the command line
// (cli/) turns the same table into flags. Defaults are the README's default copy-task run.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "data/config_field.h"
#include "data/task.h"
#include "nn/sequence_model.h"
#include "train/checkpoint.h"
#include "train/optimizer.h"

namespace gradlab::train {

struct RunConfig {
  std::string model = "decoder";  // a kind of nn::model_kinds(): decoder | seq2seq | tms
  data::TaskConfig task;          // a row of data::task_kinds() and its options
  nn::ModelConfig net;            // vocab_size and max_len follow from the task
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  int64_t batch_size = 64;  // 0: the whole training set, for a task with a finite one
  int64_t steps = 3000;     // at most this many optimizer steps
  double clip_norm = 1.0;
  int64_t eval_every = 50;
  int64_t eval_size = 512;
  double target_exact_match = 0.99;  // stop once held-out exact match reaches it; 0 disables
  uint64_t seed = 0;                 // data, initialisation and dropout streams
  int64_t threads = 1;
  double max_memory = 0;       // GiB a run may need (train/memory.h); 0: 80% of the machine's
  std::string out_dir;         // default runs/<task>-<timestamp>
  int64_t save_every = 0;      // 0: only the final (and best) checkpoint
  int64_t keep = 3;            // step checkpoints kept; older ones are deleted
  int64_t check_replicas = 0;  // several processes: compare their state every N steps (0: never)
  // Stop a run whose loss jumps far above its running level (fit.h); false lets the loss spikes
  // of long full-batch runs (grokking's) pass. Non-finite values always stop a run.
  bool stop_on_loss_spike = true;
};

// One field of a RunConfig: its name (flag, /config attribute and config-file key), a pointer
// to it, and its help line (data/config_field.h).
using ConfigField = data::ConfigField;

// Every field of config, bound to it, with the options of every task (data::all_task_fields):
// the flags of `gradlab train`.
std::vector<ConfigField> config_fields(RunConfig& config);
// The fields of config's own run, in the order of /config: the options of its task only.
std::vector<ConfigField> run_fields(RunConfig& config);

// The task config.task names (data::make_task), its options checked: throws ConfigError
// naming the flag.
std::shared_ptr<data::Task> make_task(const RunConfig& config);
// make_task, then what the task reads before its sizes are known (a text run: its file, whose
// vocabulary is stored in config). Throws ConfigError naming the file or the flag.
std::shared_ptr<data::Task> prepare_task(RunConfig& config);

// Sequences per training step: --batch-size, or with 0 (full batch) the task's whole training
// set (data::Task::training_set_size).
int64_t batch_rows(const RunConfig& config);

// The most OpenMP threads a command may ask for: 4 x this machine's cores. More threads than
// cores never make a kernel faster (they take turns on the cores and wait for each other at
// every barrier), and libgomp starts every thread asked for, each with its own stack: --threads
// 100000 died of SIGSEGV. The margin above the core count leaves room to measure
// oversubscription.
int64_t max_threads();
// Throws ConfigError naming --threads unless threads is in [1, max_threads()].
void check_threads(int64_t threads);

// Flags that may differ when resuming; all others come from the checkpoint.
const std::vector<std::string>& resumable_options();

// Copies the fields named by keys (flag names, or a field's old name) from `from` into `to`.
void copy_fields(const RunConfig& from, RunConfig& to, const std::vector<std::string>& keys);

// Checks every value that does not depend on the data (flags, schedule, optimizer); throws
// ConfigError naming the flag. Cheap: run it before reading a large text.
void check_fields(const RunConfig& config);

// Fills the derived fields (vocabulary size, positions, schedule sizes) and checks every value;
// throws ConfigError naming the flag. A text run needs its vocabulary first (prepare_task
// reads it from the file).
void finalize(RunConfig& config);

// Throws ConfigError unless a tensor of these dims has at most 2^28 elements (the checkpoint
// reader's limit, so that every model saved can be loaded again), naming the flags that size it
// (e.g. "--batch-size 64, --length 100000 and --d-model 64 describe [B, T, C] activations
// [64, 200001, 64], above 2^28 elements").
void check_elements(const std::string& what, std::initializer_list<int64_t> dims,
                    const std::vector<std::string>& flags);

// The checkpoint's /config attributes (run_fields), and back. from_entries throws
// CheckpointError naming the path and the missing, mistyped or non-finite attribute, or the
// task option its task refuses (a stored vocabulary out of order); it reads a
// renamed field under its old key too, and ignores the attributes of other tasks (a file
// written before /config held its own task's options only has every task's).
std::vector<ConfigEntry> to_entries(const RunConfig& config);
RunConfig from_entries(const std::vector<ConfigEntry>& entries, const std::string& path);

// The /config a Trainer built by a program writes (TrainerOptions::config is `given`): `given`
// itself when it describes a run (it names a task: to_entries of a RunConfig); otherwise, for a
// model of a built-in kind (nn::SequenceModel::kind), the marker of a program's own data
// (data::own_data_kind), the model's vocabulary and positions and its kind's fields, followed by
// the entries of `given` under other keys, so that the command line can rebuild the model; for
// a model of one's own, `given`.
std::vector<ConfigEntry> program_entries(const nn::SequenceModel& model,
                                         const std::vector<ConfigEntry>& given);

// program_options config-file syntax (key = value), reusable with --config.
std::string to_config_file(const RunConfig& config);

}  // namespace gradlab::train
