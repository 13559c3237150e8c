// RunConfig: everything that defines a training run (model, task, optimizer, schedule, loop),
// its validation, and its round trip through a checkpoint's /config attributes and a config
// file. One table of fields (`config_fields`) names every hyperparameter once; the command line
// (train/cli/) turns the same table into flags. Defaults are the README's default copy-task run.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "data/task.h"
#include "nn/sequence_model.h"
#include "train/checkpoint.h"
#include "train/optimizer.h"

namespace gradlab::train {

struct RunConfig {
  std::string model = "decoder";  // a kind of nn::model_kinds(): decoder | seq2seq
  data::TaskConfig task;
  nn::ModelConfig net;  // vocab_size and max_len follow from the task
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  int64_t batch_size = 64;
  int64_t steps = 3000;  // at most this many optimizer steps
  double clip_norm = 1.0;
  int64_t eval_every = 50;
  int64_t eval_size = 512;
  double target_accuracy = 0.99;  // stop once held-out exact match reaches it; 0 disables
  uint64_t seed = 0;              // data, initialisation and dropout streams
  int64_t threads = 1;
  double max_memory = 0;       // GiB a run may need (train/memory.h); 0: 80% of the machine's
  std::string out_dir;         // default runs/<task>-<timestamp>
  int64_t save_every = 0;      // 0: only the final (and best) checkpoint
  int64_t keep = 3;            // step checkpoints kept; older ones are deleted
  int64_t check_replicas = 0;  // several processes: compare their state every N steps (0: never)

  // --task text: language modelling on a text file of the user's (data/text.h).
  std::string data;                // the file
  std::string tokenizer = "char";  // char | byte
  int64_t context = 64;            // tokens the model reads: windows of context + 1 tokens
  double val_fraction = 0.1;       // the file's last tokens, held out
  int64_t eval_iters = 200;        // validation windows per evaluation (a fixed set)
  bool eval_full = false;          // evaluate on the whole validation split instead
  // The char tokenizer's symbols (data::Vocabulary::serialize), set from the file by
  // load_text_corpus and kept in checkpoints, so a model decodes without its data file.
  std::string vocabulary;
};

// One field of a RunConfig: its name (flag, /config attribute and config-file key), a pointer
// to it, and its help line.
struct ConfigField {
  const char* key;
  std::variant<int64_t*, double*, std::string*, bool*, uint64_t*> value;
  const char* help;
  // Part of a checkpoint's /config; false for a setting of this machine (threads).
  bool saved = true;
  // May be missing from a checkpoint written before the field existed: it keeps its default.
  bool optional = false;
};

// Every field of config, bound to it, in the order of /config.
std::vector<ConfigField> config_fields(RunConfig& config);

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

// Copies the fields named by keys (flag names) from `from` into `to`.
void copy_fields(const RunConfig& from, RunConfig& to, const std::vector<std::string>& keys);

// Checks every value that does not depend on the data (flags, schedule, optimizer); throws
// ConfigError naming the flag. Cheap: run it before reading a large text.
void check_fields(const RunConfig& config);

// Fills the derived fields (vocabulary size, positions, schedule sizes) and checks every value;
// throws ConfigError naming the flag. A text run needs its vocabulary first (load_text_corpus
// in trainer.h reads it from the file).
void finalize(RunConfig& config);

// The checkpoint's /config attributes, and back. from_entries throws CheckpointError naming
// the path and the missing, mistyped or non-finite attribute.
std::vector<ConfigEntry> to_entries(const RunConfig& config);
RunConfig from_entries(const std::vector<ConfigEntry>& entries, const std::string& path);

// program_options config-file syntax (key = value), reusable with --config.
std::string to_config_file(const RunConfig& config);

}  // namespace gradlab::train
