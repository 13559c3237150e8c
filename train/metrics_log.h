// metrics.csv: one row per evaluation of a run (step, losses, accuracies, gradient norm, learning
// rate, throughput, time; for a task with a finite training set also that set's accuracy and
// loss, for a task with parts of its held-out targets their losses), appended, and the Observer
// that writes it from train::fit's events. The command line's runs write one; a program of one's
// own can too.
#pragma once

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "train/fit.h"

namespace gradlab::train {

// The file, appended (the header when the file is new), each row flushed whole: earlier rows are
// never rewritten, and a row torn by a crash is closed by a newline before the next one.
// Throws FileError naming the file if it cannot be opened or written. `training_set`: the run's
// evaluations score a finite training set (Metrics::train), written in the last two columns,
// train_accuracy (token accuracy) and train_eval_loss; other runs' files have no such columns.
// `loss_parts`: the parts of the held-out targets the evaluations score apart (data::Task::
// loss_parts, Metrics::parts), a column <name>_loss each after those.
class MetricsLog {
 public:
  MetricsLog(const std::string& path, bool training_set, std::vector<std::string> loss_parts = {});
  void write(int64_t step, const StepResult& r, const Metrics& m, double tokens_per_second,
             double elapsed);

 private:
  std::string path_;
  std::ofstream out_;
  bool training_set_;
  std::vector<std::string> loss_parts_;
};

// Measures a run as fit reports it (tokens per second, elapsed time, time to the last step, time
// spent summing gradients) and writes a metrics.csv row at every evaluation. Derive from it to
// report more (the command line adds its progress line).
class MetricsObserver : public Observer {
 public:
  // path: the metrics.csv to append to; steps: LoopPolicy::steps; first_step: trainer.step()
  // before fit; training_set, loss_parts: what else the evaluations score (MetricsLog).
  MetricsObserver(const std::string& path, int64_t steps, int64_t first_step,
                  bool training_set = false, std::vector<std::string> loss_parts = {});

  void on_step(int64_t step, const StepResult& result) override;
  void on_evaluation(int64_t step, const StepResult& last, const Metrics& metrics) override;

  double seconds() const;  // since construction
  double sync_seconds() const { return sync_seconds_; }
  double tokens_per_second() const { return rate_; }  // as of the last step
  double eta_seconds() const { return eta_; }         // to LoopPolicy::steps, at that rate

 private:
  MetricsLog log_;
  int64_t total_steps_, first_step_;
  double tokens_ = 0;  // read since the start
  double sync_seconds_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double elapsed_ = 0, rate_ = 0, eta_ = 0;
};

}  // namespace gradlab::train
