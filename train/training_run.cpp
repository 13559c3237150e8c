// The steps of a training run the command line and the Python package share (training_run.h).
#include "train/training_run.h"

#include <filesystem>

#include "io/atomic_file.h"

namespace gradlab::train {

std::shared_ptr<const data::Task> prepare_run(RunConfig& config) {
  check_fields(config);  // a usage error costs no time reading the text
  std::shared_ptr<const data::Task> task = prepare_task(config);
  finalize(config);
  return task;
}

std::vector<std::string> start_run_directory(const RunConfig& config,
                                             const RunDirectoryClaim& claim) {
  std::vector<std::string> removed = prepare_run_directory(config.out_dir, claim);
  io::replace_file_text((std::filesystem::path(config.out_dir) / "config.ini").string(),
                        to_config_file(config));
  return removed;
}

LoopPolicy loop_policy(const RunConfig& config, const data::Task& task,
                       const RunDirectoryClaim& claim) {
  return {.steps = config.steps,
          .eval_every = config.eval_every,
          .target_exact_match = config.target_exact_match,
          .best_by_loss = task.judged_by_loss(),
          .out_dir = config.out_dir,
          .save_every = config.save_every,
          .keep = config.keep,
          .earlier_checkpoints = claim.earlier_checkpoints,
          .check_replicas_every = 0,
          .stop_on_signal = false,
          .stop_on_loss_spike = config.stop_on_loss_spike};
}

}  // namespace gradlab::train
