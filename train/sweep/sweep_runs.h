// The runs of a sweep on disk: how far each has got (so that a sweep run again skips the
// finished ones and resumes the others), what its metrics.csv says in a few numbers, and
// DIR/results.csv, a row per run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "train/sweep/sweep_file.h"

namespace gradlab::train {

enum class RunState {
  New,        // no run files: start it
  Started,    // run files but no readable step checkpoint (killed before its first save)
  Resumable,  // a readable step checkpoint that train::fit would go on from
  Finished,   // its newest checkpoint is where fit stops: its steps, or its target reached
};

// The state of the run in dir. Finished follows fit's stop rule: the newest readable step
// checkpoint is at the run's --steps, or metrics.csv scored it at --target-exact-match.
RunState run_state(const std::string& dir);

// A run's metrics.csv in a few numbers: the last row's, the best over the rows, and its wall
// time (the last elapsed_seconds of each stretch of training, summed: a resumed run's clock
// starts again from 0).
struct RunSummary {
  int64_t steps = 0;
  double final_train_loss = 0, final_eval_loss = 0, best_eval_loss = 0;
  double final_token_accuracy = 0, best_token_accuracy = 0;
  double final_exact_match = 0, best_exact_match = 0;
  double wall_seconds = 0;
};

// The summary of a metrics.csv, or nullopt for a file missing or without a row. Rows torn by a
// crash are skipped.
std::optional<RunSummary> summarize_metrics(const std::string& path);

// What results.csv says of a run besides its metrics: "finished", "failed", "stopped" (it has
// started, not finished: run the sweep again) or "pending".
std::string run_status(const std::string& dir, const SweepSpec& spec, const std::string& name);

// DIR/results.csv rewritten whole (atomically): a header, then a row per run of spec in
// sweep_points' order: name, each grid key's value, seed, status, then RunSummary's columns
// (empty for a run without metrics).
void write_results_csv(const std::string& dir, const SweepSpec& spec);

}  // namespace gradlab::train
