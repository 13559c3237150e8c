// metrics.csv and its observer (metrics_log.h).
#include "train/metrics_log.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "autograd/error.h"

namespace gradlab::train {

namespace fs = std::filesystem;

MetricsLog::MetricsLog(const std::string& path, bool training_set,
                       std::vector<std::string> loss_parts)
    : path_(path), training_set_(training_set), loss_parts_(std::move(loss_parts)) {
  std::error_code error;
  const auto size = fs::file_size(path, error);
  bool torn = false;
  if (!error && size > 0) {
    std::ifstream in(path, std::ios::binary);
    in.seekg(-1, std::ios::end);
    torn = in.get() != '\n';
  }
  out_.open(path, std::ios::app);
  if (!out_) throw FileError(path + ": cannot append to it");
  // Every float32 loss exactly, so that runs can be compared to a few ulps.
  out_.precision(9);
  if (torn) out_ << '\n';
  if (error || size == 0) {
    out_ << "step,train_loss,eval_loss,token_accuracy,exact_match,grad_norm,lr,"
            "tokens_per_second,elapsed_seconds,eval_bits_per_token"
         << (training_set ? ",train_accuracy,train_eval_loss" : "");
    for (const std::string& part : loss_parts_) out_ << ',' << part << "_loss";
    out_ << '\n';
  }
  if (!out_.flush()) throw FileError(path + ": cannot write to it: " + std::strerror(errno));
}

void MetricsLog::write(int64_t step, const StepResult& r, const Metrics& m,
                       double tokens_per_second, double elapsed) {
  out_ << step << ',' << r.loss << ',' << m.loss << ',' << m.token_accuracy << ',' << m.exact_match
       << ',' << r.grad_norm << ',' << r.lr << ',' << tokens_per_second << ',' << elapsed << ','
       << m.loss / std::log(2.0);
  // An evaluation without the training set's scores leaves its cells empty.
  if (training_set_) {
    out_ << ',';
    if (m.train) out_ << m.train->token_accuracy;
    out_ << ',';
    if (m.train) out_ << m.train->loss;
  }
  for (const std::string& part : loss_parts_) {
    out_ << ',';
    for (const PartLoss& scored : m.parts) {
      if (scored.name == part) out_ << scored.loss;
    }
  }
  out_ << '\n';
  if (!out_.flush()) throw FileError(path_ + ": cannot append a row: " + std::strerror(errno));
}

MetricsObserver::MetricsObserver(const std::string& path, int64_t steps, int64_t first_step,
                                 bool training_set, std::vector<std::string> loss_parts)
    : log_(path, training_set, std::move(loss_parts)),
      total_steps_(steps),
      first_step_(first_step) {}

void MetricsObserver::on_step(int64_t step, const StepResult& result) {
  tokens_ += static_cast<double>(result.tokens);
  sync_seconds_ += result.sync_seconds;
  elapsed_ = seconds();
  const double done = static_cast<double>(step - first_step_);
  rate_ = tokens_ / elapsed_;
  eta_ = elapsed_ / done * static_cast<double>(total_steps_ - step);
}

void MetricsObserver::on_evaluation(int64_t step, const StepResult& last, const Metrics& metrics) {
  log_.write(step, last, metrics, rate_, elapsed_);
}

double MetricsObserver::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

}  // namespace gradlab::train
