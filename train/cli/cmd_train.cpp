// `gradlab train`: flags and --config into a RunConfig, --resume, then train::fit with an
// observer that prints the progress line and writes metrics.csv, and a clean stop on SIGINT or
// SIGTERM.
#include <omp.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include "train/cli/commands.h"
#include "train/cli/options.h"
#include "train/cli/run_options.h"
#include "train/fit.h"

namespace gradlab::cli {
namespace {

namespace fs = std::filesystem;
namespace po = boost::program_options;
using namespace train;

volatile std::sig_atomic_t stop_requested = 0;
extern "C" void request_stop(int) {
  stop_requested = 1;
}

std::string default_out_dir(const RunConfig& config) {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  return "runs/" + config.task.name + "-" + stamp;
}

// One line per evaluation in metrics.csv (header written when the file is new).
class MetricsLog {
 public:
  explicit MetricsLog(const std::string& path) {
    const bool fresh = !fs::exists(path);
    out_.open(path, std::ios::app);
    if (!out_) throw std::runtime_error("cannot write " + path);
    if (fresh) {
      out_ << "step,train_loss,eval_loss,token_accuracy,exact_match,grad_norm,lr,"
              "tokens_per_second,elapsed_seconds,eval_bits_per_token\n";
    }
  }
  void write(int64_t step, const StepResult& r, const Metrics& m, double tokens_per_second,
             double elapsed) {
    out_ << step << ',' << r.loss << ',' << m.loss << ',' << m.token_accuracy << ','
         << m.exact_match << ',' << r.grad_norm << ',' << r.lr << ',' << tokens_per_second << ','
         << elapsed << ',' << m.loss / std::log(2.0) << '\n';
    out_.flush();
  }

 private:
  std::ofstream out_;
};

// Progress: one line rewritten in place on a terminal, one plain line per evaluation otherwise.
// A language model's line shows the held-out loss in bits per token; a toy task's, accuracy.
class Progress {
 public:
  Progress(int64_t total, bool language_model)
      : total_(total), language_model_(language_model), tty_(isatty(STDOUT_FILENO)) {}
  void update(int64_t step, const StepResult& r, const Metrics* m, double tokens_per_second,
              double eta) {
    if (!tty_ && !m) return;
    if (m) last_ = *m;
    char held_out[96];
    if (language_model_) {
      std::snprintf(held_out, sizeof held_out, "val %.4f (%.3f bits/token)", last_.loss,
                    last_.loss / std::log(2.0));
    } else {
      std::snprintf(held_out, sizeof held_out, "acc %.1f%%  exact %.1f%%",
                    100 * last_.token_accuracy, 100 * last_.exact_match);
    }
    std::printf("%sstep %lld/%lld  loss %.4f  %s  %.0f tok/s  ETA %.0fs%s", tty_ ? "\r\033[K" : "",
                static_cast<long long>(step), static_cast<long long>(total_), r.loss, held_out,
                tokens_per_second, eta, tty_ ? "" : "\n");
    std::fflush(stdout);
  }
  void finish() {
    if (tty_) std::printf("\n");
  }

 private:
  int64_t total_;
  bool language_model_, tty_;
  Metrics last_;
};

// The command line's view of fit: the progress line, metrics.csv, and the signal flag.
class CliObserver : public Observer {
 public:
  CliObserver(const RunConfig& config, int64_t first_step)
      : metrics_((fs::path(config.out_dir) / "metrics.csv").string()),
        progress_(config.steps, config.task.name == "text"),
        total_steps_(config.steps),
        first_step_(first_step) {}

  void on_step(int64_t step, const StepResult& result) override {
    tokens_ += static_cast<double>(result.tokens);
    measure(step);
    progress_.update(step, result, nullptr, rate_, eta_);
  }
  void on_evaluation(int64_t step, const StepResult& last, const Metrics& metrics) override {
    metrics_.write(step, last, metrics, rate_, elapsed_);
    progress_.update(step, last, &metrics, rate_, eta_);
  }
  void on_stop(const FitResult&) override { progress_.finish(); }
  bool should_stop() override { return stop_requested; }

  double seconds() const { return seconds_since_start(); }

 private:
  double seconds_since_start() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void measure(int64_t step) {
    elapsed_ = seconds_since_start();
    const double done = static_cast<double>(step - first_step_);
    rate_ = tokens_ / elapsed_;
    eta_ = elapsed_ / done * static_cast<double>(total_steps_ - step);
  }

  MetricsLog metrics_;
  Progress progress_;
  int64_t total_steps_, first_step_;
  double tokens_ = 0;  // read since the start
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double elapsed_ = 0, rate_ = 0, eta_ = 0;
};

struct Options {
  RunConfig config;
  std::string resume;                              // --resume path
  std::optional<CheckpointData> resumed;           // its contents
  std::shared_ptr<const data::TextCorpus> corpus;  // --task text: the file, read once
};

// Parses flags (and --config FILE); on --resume the checkpoint's configuration is used, with
// only the resumable flags allowed to change. Returns -1 to go on, or an exit code.
int parse(const std::vector<std::string>& args, Options& opts) {
  po::options_description options(
      "gradlab train: train a transformer on a toy task or a text file\n"
      "Every flag can also be set in a --config file (key = value lines).\nOptions");
  std::string config_file;
  options.add_options()("help,h", "show this help")("config", po::value(&config_file),
                                                    "read options from this file (flags win)")(
      "resume", po::value(&opts.resume), "continue the run saved in this checkpoint");
  add_run_options(options, opts.config);
  po::variables_map vm;
  if (const int code = parse_or_usage("train", args, options, vm); code >= 0) return code;
  try {
    if (!config_file.empty()) {
      if (const auto kind = special_file(config_file)) {
        return usage_error(
            "train", "--config " + config_file + ": not a regular file (" + *kind + ")", options);
      }
      std::ifstream in(config_file);
      if (!in) return usage_error("train", "--config: cannot read " + config_file, options);
      const po::parsed_options parsed = po::parse_config_file(in, options);
      if (const std::string reason = refused_value(parsed, true); !reason.empty()) {
        return usage_error("train", config_file + ": " + reason, options);
      }
      po::store(parsed, vm);
      po::notify(vm);
    }
  } catch (po::error& e) {
    return usage_error("train", std::string(config_file) + ": " + error_message(e), options);
  }
  if (!opts.resume.empty()) {
    const RunConfig given = opts.config;
    require_checkpoint_file(opts.resume);
    opts.resumed = read_checkpoint(opts.resume);
    opts.config = from_entries(opts.resumed->config, opts.resume);
    for (const auto& [key, value] : vm) {
      if (value.defaulted() || key == "resume" || key == "config") continue;
      const auto& allowed = resumable_options();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        return usage_error("train",
                           "--" + key +
                               " cannot change on --resume (the checkpoint's "
                               "configuration is used)",
                           options);
      }
    }
    std::vector<std::string> overridden;
    for (const std::string& key : resumable_options()) {
      if (vm.count(key) && !vm[key].defaulted()) overridden.push_back(key);
    }
    copy_fields(given, opts.config, overridden);
    opts.config.out_dir =
        given.out_dir.empty() ? fs::path(opts.resume).parent_path().string() : given.out_dir;
    const int64_t done = opts.resumed->train.step;
    if (opts.config.steps <= done) {
      return usage_error("train",
                         "--steps " + std::to_string(opts.config.steps) +
                             ": the checkpoint is already at step " + std::to_string(done) +
                             "; ask for more steps to resume",
                         options);
    }
  }
  try {
    check_fields(opts.config);  // a usage error costs no time reading the text
    if (opts.config.task.name == "text") opts.corpus = load_text_corpus(opts.config);
    finalize(opts.config);
  } catch (const ConfigError& e) {
    return usage_error("train", e.what(), options);
  }
  if (opts.config.out_dir.empty()) opts.config.out_dir = default_out_dir(opts.config);
  return -1;
}

}  // namespace

int parse_train(const std::vector<std::string>& args) {
  Options opts;
  return parse(args, opts);
}

int run_train(const std::vector<std::string>& args) {
  Options opts;
  if (const int code = parse(args, opts); code >= 0) return code;
  const RunConfig& config = opts.config;
  omp_set_num_threads(static_cast<int>(config.threads));

  Trainer trainer(config, opts.corpus);
  if (opts.resumed) trainer.restore(*opts.resumed, opts.resume);
  fs::create_directories(config.out_dir);
  std::ofstream(fs::path(config.out_dir) / "config.ini") << to_config_file(config);

  std::signal(SIGINT, request_stop);
  std::signal(SIGTERM, request_stop);
  CliObserver observer(config, trainer.step());
  const LoopPolicy policy{.steps = config.steps,
                          .eval_every = config.eval_every,
                          .target_accuracy = config.target_accuracy,
                          .best_by_loss = config.task.name == "text",
                          .out_dir = config.out_dir,
                          .save_every = config.save_every,
                          .keep = config.keep};
  const FitResult result = fit(trainer, policy, observer);
  if (result.reason == StopReason::Diverged) {
    std::cerr << "gradlab train: stopped: " << result.error << "; "
              << (result.last_checkpoint.empty()
                      ? "no checkpoint was saved"
                      : "the last good checkpoint is " + result.last_checkpoint)
              << '\n';
    return kExitFailure;
  }
  if (result.reason == StopReason::Requested) {
    std::printf("Interrupted after step %lld; saved %s\nResume with: gradlab train --resume %s\n",
                static_cast<long long>(trainer.step()), result.checkpoint.c_str(),
                result.checkpoint.c_str());
    return kExitOk;
  }
  const Metrics& final_metrics = result.last_metrics;
  std::printf(
      "Trained %lld steps in %.2f s: held-out loss %.4f, token accuracy %.2f%%, exact "
      "match %.2f%%%s\nCheckpoint: %s\nMetrics: %s\n",
      static_cast<long long>(trainer.step() - result.first_step), observer.seconds(),
      final_metrics.loss, 100 * final_metrics.token_accuracy, 100 * final_metrics.exact_match,
      result.reason == StopReason::Target ? " (target reached)" : "", result.checkpoint.c_str(),
      (fs::path(config.out_dir) / "metrics.csv").c_str());
  return kExitOk;
}

}  // namespace gradlab::cli
