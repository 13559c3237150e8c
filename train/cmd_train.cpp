// `gradlab train`: the training loop around Trainer: run directory, metrics.csv, progress,
// periodic/best/final checkpoints, resume, early stopping, and a clean stop on SIGINT/SIGTERM.
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

#include "train/commands.h"
#include "train/options.h"
#include "train/trainer.h"

namespace gradlab::train {
namespace {

namespace fs = std::filesystem;
namespace po = boost::program_options;

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

std::string step_checkpoint(const std::string& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%06lld.h5", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

// Deletes all but the newest `keep` step-*.h5 files (their names sort by step).
void prune_checkpoints(const std::string& dir, int64_t keep) {
  std::vector<fs::path> steps;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("step-") && name.ends_with(".h5")) steps.push_back(entry.path());
  }
  std::sort(steps.begin(), steps.end());
  for (size_t i = 0; i + keep < steps.size(); ++i) fs::remove(steps[i]);
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
              "tokens_per_second,elapsed_seconds\n";
    }
  }
  void write(int64_t step, const StepResult& r, const Metrics& m, double tokens_per_second,
             double elapsed) {
    out_ << step << ',' << r.loss << ',' << m.loss << ',' << m.token_accuracy << ','
         << m.exact_match << ',' << r.grad_norm << ',' << r.lr << ',' << tokens_per_second << ','
         << elapsed << '\n';
    out_.flush();
  }

 private:
  std::ofstream out_;
};

// Progress: one line rewritten in place on a terminal, one plain line per evaluation otherwise.
class Progress {
 public:
  explicit Progress(int64_t total) : total_(total), tty_(isatty(STDOUT_FILENO)) {}
  void update(int64_t step, const StepResult& r, const Metrics* m, double tokens_per_second,
              double eta) {
    if (!tty_ && !m) return;
    if (m) last_ = *m;
    std::printf("%sstep %lld/%lld  loss %.4f  acc %.1f%%  exact %.1f%%  %.0f tok/s  ETA %.0fs%s",
                tty_ ? "\r\033[K" : "", static_cast<long long>(step),
                static_cast<long long>(total_), r.loss, 100 * last_.token_accuracy,
                100 * last_.exact_match, tokens_per_second, eta, tty_ ? "" : "\n");
    std::fflush(stdout);
  }
  void finish() {
    if (tty_) std::printf("\n");
  }

 private:
  int64_t total_;
  bool tty_;
  Metrics last_;
};

struct Options {
  RunConfig config;
  std::string resume;                     // --resume path
  std::optional<CheckpointData> resumed;  // its contents
};

// Parses flags (and --config FILE); on --resume the checkpoint's configuration is used, with
// only the resumable flags allowed to change. Returns -1 to go on, or an exit code.
int parse(const std::vector<std::string>& args, Options& opts) {
  po::options_description options(
      "gradlab train: train a transformer on a toy task\n"
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
      std::ifstream in(config_file);
      if (!in) return usage_error("train", "--config: cannot read " + config_file, options);
      po::store(po::parse_config_file(in, options), vm);
      po::notify(vm);
    }
  } catch (po::error& e) {
    return usage_error("train", std::string(config_file) + ": " + error_message(e), options);
  }
  if (!opts.resume.empty()) {
    const RunConfig given = opts.config;
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

  Trainer trainer(config);
  if (opts.resumed) trainer.restore(*opts.resumed, opts.resume);
  fs::create_directories(config.out_dir);
  std::ofstream(fs::path(config.out_dir) / "config.ini") << to_config_file(config);
  MetricsLog metrics((fs::path(config.out_dir) / "metrics.csv").string());

  std::signal(SIGINT, request_stop);
  std::signal(SIGTERM, request_stop);
  const auto start = std::chrono::steady_clock::now();
  auto seconds_since = [](auto t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  const int64_t first_step = trainer.step();
  const double tokens_per_step =
      static_cast<double>(config.batch_size) * (trainer.task().sample_length() - 1);
  std::string last_saved;
  auto save = [&](const std::string& path) {
    save_checkpoint(path, trainer.checkpoint());
    last_saved = path;
  };

  Progress progress(config.steps);
  Metrics final_metrics;
  StepResult last;
  bool reached = false;
  try {
    while (trainer.step() < config.steps && !stop_requested && !reached) {
      last = trainer.train_step();
      const int64_t step = trainer.step();
      const double elapsed = seconds_since(start);
      const double rate = tokens_per_step * static_cast<double>(step - first_step) / elapsed;
      const double eta = elapsed / static_cast<double>(step - first_step) *
                         static_cast<double>(config.steps - step);
      if (step % config.eval_every == 0 || step == config.steps) {
        final_metrics = trainer.evaluate();
        metrics.write(step, last, final_metrics, rate, elapsed);
        const double previous_best = trainer.best_metric();
        trainer.record_metric(final_metrics.exact_match);
        if (trainer.best_metric() > previous_best) {
          save((fs::path(config.out_dir) / "best.h5").string());
        }
        reached = config.target_accuracy > 0 && final_metrics.exact_match >= config.target_accuracy;
        progress.update(step, last, &final_metrics, rate, eta);
      } else {
        progress.update(step, last, nullptr, rate, eta);
      }
      if (config.save_every > 0 && step % config.save_every == 0) {
        save(step_checkpoint(config.out_dir, step));
        prune_checkpoints(config.out_dir, config.keep);
      }
    }
  } catch (const NonFiniteLoss& e) {
    progress.finish();
    std::cerr << "gradlab train: stopped: " << e.what() << "; "
              << (last_saved.empty() ? "no checkpoint was saved"
                                     : "the last good checkpoint is " + last_saved)
              << '\n';
    return kExitFailure;
  }
  progress.finish();
  const std::string final_path = step_checkpoint(config.out_dir, trainer.step());
  if (last_saved != final_path) save(final_path);
  prune_checkpoints(config.out_dir, config.keep);
  if (stop_requested) {
    std::printf("Interrupted after step %lld; saved %s\nResume with: gradlab train --resume %s\n",
                static_cast<long long>(trainer.step()), final_path.c_str(), final_path.c_str());
    return kExitOk;
  }
  std::printf(
      "Trained %lld steps in %.2f s: held-out loss %.4f, token accuracy %.2f%%, exact "
      "match %.2f%%%s\nCheckpoint: %s\nMetrics: %s\n",
      static_cast<long long>(trainer.step() - first_step), seconds_since(start), final_metrics.loss,
      100 * final_metrics.token_accuracy, 100 * final_metrics.exact_match,
      reached ? " (target reached)" : "", final_path.c_str(),
      (fs::path(config.out_dir) / "metrics.csv").c_str());
  return kExitOk;
}

}  // namespace gradlab::train
