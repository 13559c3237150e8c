// Whether a training run may write into its directory (--out) without losing earlier work, and
// the clearing --overwrite asks for: the command line claims the directory before it trains, and
// a program of one's own can do the same.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gradlab::train {

// What a run is about to do to its directory.
struct RunDirectory {
  std::string dir;
  // The checkpoint a resume starts from ("" for a new run) and the step it holds.
  std::string resume;
  std::optional<int64_t> resumed_step;
  bool overwrite = false;  // --overwrite: the earlier run's files may be replaced
};

// What a successful claim found.
struct RunDirectoryClaim {
  // The step checkpoints of the run a resume continues (at or before its step), oldest first:
  // fit's LoopPolicy::earlier_checkpoints.
  std::vector<std::string> earlier_checkpoints;
  // What --overwrite replaces, removed by prepare_run_directory: an earlier run's files, or on a
  // resume the checkpoints after the resumed step.
  std::vector<std::string> replaced;
  int64_t metrics_after = -1;  // metrics.csv rows after this step go too (-1: none)
};

// Decides whether the run may write into run.dir. An empty or new directory is free. A resume
// into the directory it comes from continues that run, unless the run saved checkpoints past
// the resumed step: those would be overwritten. Metrics rows past the resumed step without a
// checkpoint (a run killed between an evaluation and its save) are dropped, since the resumed
// run writes them again, bit for bit. run.overwrite allows both refusals and records what will
// be replaced. Throws ConfigError naming --out or --resume, what the directory holds and the
// ways out (--resume, another --out, --overwrite); nothing is changed on disk.
RunDirectoryClaim claim_run_directory(const RunDirectory& run);

// Creates the directory, carries out what the claim recorded for --overwrite (removing replaced
// files and the metrics rows after metrics_after), and removes the temporary files of saves that
// died with their process. Returns the temporary files removed.
std::vector<std::string> prepare_run_directory(const std::string& dir,
                                               const RunDirectoryClaim& claim);

}  // namespace gradlab::train
