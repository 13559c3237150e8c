// The progress line (progress.h).
#include "cli/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace gradlab::cli {

Progress::Progress(int64_t total, const data::Task& task)
    : total_(total),
      language_model_(task.language_model() != nullptr),
      predicts_tokens_(task.predicts_tokens()),
      tty_(isatty(STDOUT_FILENO)) {}

void Progress::update(int64_t step, const train::StepResult& r, const train::Metrics* m,
                      double tokens_per_second, double eta) {
  if (!tty_ && !m) return;
  if (m) last_ = *m;
  char held_out[160];
  char speed[32] = "";
  if (predicts_tokens_) std::snprintf(speed, sizeof speed, "  %.0f tok/s", tokens_per_second);
  if (language_model_) {
    std::snprintf(held_out, sizeof held_out, "val %.4f (%.3f bits/token)", last_.loss,
                  last_.loss / std::log(2.0));
  } else if (!predicts_tokens_) {
    std::snprintf(held_out, sizeof held_out, "val %.4f", last_.loss);
  } else {
    int used = std::snprintf(held_out, sizeof held_out, "acc %.1f%%  exact %.1f%%",
                             100 * last_.token_accuracy, 100 * last_.exact_match);
    if (last_.train) {
      used += std::snprintf(held_out + used, sizeof held_out - static_cast<size_t>(used),
                            "  train acc %.1f%%  train loss %.4f",
                            100 * last_.train->token_accuracy, last_.train->loss);
    }
    for (const train::PartLoss& part : last_.parts) {
      if (used >= static_cast<int>(sizeof held_out)) break;
      used += std::snprintf(held_out + used, sizeof held_out - static_cast<size_t>(used),
                            "  %s loss %.4f", part.name.c_str(), part.loss);
    }
  }
  std::printf("%sstep %lld/%lld  loss %.4f  %s%s  ETA %.0fs%s", tty_ ? "\r\033[K" : "",
              static_cast<long long>(step), static_cast<long long>(total_), r.loss, held_out, speed,
              eta, tty_ ? "" : "\n");
  std::fflush(stdout);
}

void Progress::finish() {
  if (tty_) std::printf("\n");
}

}  // namespace gradlab::cli
