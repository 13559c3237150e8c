// RunConfig: everything that defines a training run (model, task, optimizer, schedule, loop),
// with its command-line flags, its validation, and its round trip through a checkpoint's
// /config attributes. Defaults are the README's default copy-task run.
#pragma once

#include <boost/program_options.hpp>
#include <string>
#include <vector>

#include "data/task.h"
#include "nn/models.h"
#include "train/checkpoint.h"
#include "train/optimizer.h"

namespace gradlab::train {

struct RunConfig {
  std::string model = "decoder";  // decoder | seq2seq
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
  std::string out_dir;     // default runs/<task>-<timestamp>
  int64_t save_every = 0;  // 0: only the final (and best) checkpoint
  int64_t keep = 3;        // step checkpoints kept; older ones are deleted
};

// Adds every hyperparameter as a flag bound to config's fields (defaults from config).
void add_run_options(boost::program_options::options_description& options, RunConfig& config);

// Flags that may differ when resuming; all others come from the checkpoint.
const std::vector<std::string>& resumable_options();

// Copies the fields named by keys (flag names) from `from` into `to`.
void copy_fields(const RunConfig& from, RunConfig& to, const std::vector<std::string>& keys);

// Fills the derived fields (vocabulary, positions, schedule sizes) and checks every value;
// throws ConfigError naming the flag.
void finalize(RunConfig& config);

// The checkpoint's /config attributes, and back. from_entries throws CheckpointError naming
// the path and the missing or mistyped attribute.
std::vector<ConfigEntry> to_entries(const RunConfig& config);
RunConfig from_entries(const std::vector<ConfigEntry>& entries, const std::string& path);

// program_options config-file syntax (key = value), reusable with --config.
std::string to_config_file(const RunConfig& config);

}  // namespace gradlab::train
