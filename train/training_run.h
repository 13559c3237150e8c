// A training run's steps that `gradlab train` (cli/cmd_train.cpp) and Python's gradlab.train
// share between a configuration and train::fit: checking it and preparing its task, starting its
// directory's files, and fit's policy. One place, so that both write the same files and train
// bit for bit alike; resuming, process groups and what is printed stay with the command line.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/task.h"
#include "train/config.h"
#include "train/fit.h"
#include "train/io/run_directory_claim.h"

namespace gradlab::train {

// config checked (check_fields), its task made ready (prepare_task: a text run reads its file)
// and the sizes the task decides filled in (finalize). Throws ConfigError naming the flag.
std::shared_ptr<const data::Task> prepare_run(RunConfig& config);

// The run directory made ready as claimed (prepare_run_directory) and config.ini written in it.
// Returns the temporary files of unfinished saves that were removed, for the caller to report.
std::vector<std::string> start_run_directory(const RunConfig& config,
                                             const RunDirectoryClaim& claim);

// fit's policy for config's run of task, in claim's directory: one process, no signal handling
// (the command line turns both on for itself).
LoopPolicy loop_policy(const RunConfig& config, const data::Task& task,
                       const RunDirectoryClaim& claim);

}  // namespace gradlab::train
