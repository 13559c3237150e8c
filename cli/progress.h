// `gradlab train`'s progress line: one line rewritten in place on a terminal, one plain line per
// evaluation otherwise. A language model's line shows the held-out loss in bits per token; a toy
// task's, accuracy, and with a finite training set that set's accuracy and loss too, and the loss
// of each part of the held-out targets (induction: first_copy and second_copy); a task of
// feature vectors (tms), the held-out loss alone, with no tokens to count.
#pragma once

#include <cstdint>

#include "data/task.h"
#include "train/trainer.h"

namespace gradlab::cli {

class Progress {
 public:
  Progress(int64_t total, const data::Task& task);
  // m: the evaluation of this step, or nullptr between evaluations (then only a terminal's line
  // is rewritten, with the last evaluation's figures).
  void update(int64_t step, const train::StepResult& r, const train::Metrics* m,
              double tokens_per_second, double eta);
  // Ends a terminal's line.
  void finish();

 private:
  int64_t total_;
  bool language_model_, predicts_tokens_, tty_;
  train::Metrics last_;
};

}  // namespace gradlab::cli
