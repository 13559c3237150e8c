// What a training run writes into its directory (--out), found again: the files that make a
// directory a run directory, the step checkpoints by step, and the newest one that reads back.
// The command line uses it to refuse to clobber an earlier run and to resume into one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gradlab::train {

// The files of a run in dir, sorted: config.ini, metrics.csv, best.h5 and step-NNNNNN.h5 (empty
// when dir does not exist or holds none of them). Other files are not a run's.
std::vector<std::string> run_files(const std::string& dir);

// Whether a file name is one a run writes: config.ini, metrics.csv, best.h5, step-NNNNNN.h5.
bool is_run_file(const std::string& name);

// The step of a step checkpoint's path (".../step-000250.h5" -> 250), or -1 for another name.
int64_t checkpoint_step(const std::string& path);

// The step checkpoints in dir, oldest first.
std::vector<std::string> step_checkpoints(const std::string& dir);

// The newest step checkpoint in dir that reads as a whole checkpoint, skipping damaged ones;
// "" if there is none.
std::string newest_readable_checkpoint(const std::string& dir);

// The highest step with a row in dir's metrics.csv, or -1 without one.
int64_t last_metrics_step(const std::string& dir);

}  // namespace gradlab::train
