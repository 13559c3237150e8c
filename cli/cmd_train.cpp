// `gradlab train`: flags and --config into a RunConfig, --resume, the claim of the run directory,
// then train::fit with an observer that prints the progress line and writes metrics.csv, and a
// clean stop on SIGINT, SIGTERM or SIGUSR1. Under mpirun every process runs this, and rank 0
// alone speaks and writes.
#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include "autograd/threads.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/progress.h"
#include "cli/run_options.h"
#include "cli/run_report.h"
#include "cli/same_start.h"
#include "data/tasks.h"
#include "train/fit.h"
#include "train/io/run_directory.h"
#include "train/io/run_directory_claim.h"
#include "train/metrics_log.h"
#include "train/process_group.h"
#include "train/stop_signals.h"
#include "train/training_run.h"

namespace gradlab::cli {
namespace {

namespace fs = std::filesystem;
namespace po = boost::program_options;
using namespace train;

std::string default_out_dir(const RunConfig& config) {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  return "runs/" + config.task.name + "-" + stamp;
}

// --report: the run's report.html, rewritten (atomically) after each evaluation as a live page
// that reloads itself, and once more, whole and no longer live, when the run ends.
class LiveReport {
 public:
  explicit LiveReport(const RunConfig& config)
      : dir_(config.out_dir), out_((fs::path(dir_) / "report.html").string()) {
    args_.checkpoint = (fs::path(dir_) / "best.h5").string();
  }
  // An evaluation's report waits for the best.h5 fit saves right after it (if it is the best).
  void on_evaluation() { due_ = true; }
  void on_checkpoint(const std::string& path) {
    if (fs::path(path).filename() == "best.h5") write_if_due();
  }
  void on_step() { write_if_due(); }
  void on_stop() {
    due_ = false;
    write(false);
  }

 private:
  void write_if_due() {
    if (!due_) return;
    due_ = false;
    write(true);
  }
  void write(bool live) {
    try {
      if (write_run_report("train", dir_, out_, args_, live) >= 0) return;  // named the problem
    } catch (const std::exception& e) {
      // A report that cannot be written does not stop the training it watches.
      std::fprintf(stderr, "\ngradlab train: --report: %s\n", e.what());
    }
  }
  std::string dir_, out_;
  CheckpointArgs args_{"train --report"};
  bool due_ = false;
};

// The command line's view of fit: metrics.csv, the progress line, and the live report.
class CliObserver : public MetricsObserver {
 public:
  CliObserver(const RunConfig& config, const data::Task& task, int64_t first_step, bool report)
      : MetricsObserver((fs::path(config.out_dir) / "metrics.csv").string(), config.steps,
                        first_step, task.training_set_size() > 0, task.loss_parts()),
        progress_(config.steps, task) {
    if (report) report_.emplace(config);
  }

  void on_step(int64_t step, const StepResult& result) override {
    MetricsObserver::on_step(step, result);
    if (report_) report_->on_step();
    progress_.update(step, result, nullptr, tokens_per_second(), eta_seconds());
  }
  void on_evaluation(int64_t step, const StepResult& last, const Metrics& metrics) override {
    MetricsObserver::on_evaluation(step, last, metrics);
    if (report_) report_->on_evaluation();
    progress_.update(step, last, &metrics, tokens_per_second(), eta_seconds());
  }
  void on_checkpoint(int64_t step, const std::string& path) override {
    MetricsObserver::on_checkpoint(step, path);
    if (report_) report_->on_checkpoint(path);
  }
  void on_stop(const FitResult&) override {
    progress_.finish();
    if (report_) report_->on_stop();
  }

 private:
  Progress progress_;
  std::optional<LiveReport> report_;
};

struct Options {
  Options() {
    options.add_options()("help,h", "show this help")("config", po::value(&config_file),
                                                      "read options from this file (flags win)")(
        "resume", po::value(&resume),
        "continue the run saved in this checkpoint, or in a run directory's newest one")(
        "overwrite", po::bool_switch(&overwrite),
        "replace the run already in --out (or, on --resume, what came after the resumed step)")(
        "report", po::bool_switch(&report),
        "write the run's report.html (docs/report.md) at each evaluation, a page that reloads "
        "itself while the run is live, and whole when it ends");
    add_run_options(options, config);
  }
  po::options_description options{
      "gradlab train: train a transformer on a toy task or a text file\n"
      "Every flag can also be set in a --config file (key = value lines).\nOptions"};
  std::string config_file;  // --config
  RunConfig config;
  std::string resume;                       // --resume path
  std::optional<CheckpointHeader> resumed;  // its configuration and step (tensors: run_train)
  std::shared_ptr<const data::Task> task;   // its data read once (a language model: the file)
  bool overwrite = false;                   // --overwrite
  bool report = false;                      // --report
  // --out claimed by rank 0: what --overwrite replaces there, removed once training is about to
  // start, and the checkpoints of the run a resume continues.
  RunDirectoryClaim claim;
};

// Parses flags (and --config FILE); on --resume the checkpoint's configuration is used, with
// only the resumable flags allowed to change. `writer`: this process will write the run's files,
// and decides whether --out may take them. Returns -1 to go on, or an exit code.
int parse_train_options(const std::vector<std::string>& args, Options& opts, bool writer = true) {
  const po::options_description& options = opts.options;
  const std::string& config_file = opts.config_file;
  po::variables_map vm;
  if (const int code = parse_or_usage("train", args, options, vm); code >= 0) return code;
  std::set<std::string> command_line;  // the options given as flags, before the config file's
  for (const auto& [key, value] : vm) {
    if (!value.defaulted()) command_line.insert(key);
  }
  try {
    if (!config_file.empty()) {
      if (const int code = check_input_file("train", "--config", config_file, options); code >= 0) {
        return code;
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
  apply_old_names(vm, opts.config);
  apply_task_defaults(vm, opts.config);
  // A reason that names a renamed field names it as the user typed it.
  const auto refuse = [&](const std::string& reason) {
    return usage_error("train", as_typed(reason, vm, opts.config), options);
  };
  if (!opts.resume.empty()) {
    const RunConfig given = opts.config;
    std::error_code not_a_directory;  // a name the system refuses is left to the checks below
    if (fs::is_directory(opts.resume, not_a_directory)) {
      const std::string newest = newest_readable_checkpoint(opts.resume);
      if (newest.empty()) {
        return usage_error("train",
                           "--resume " + opts.resume + ": no readable step-*.h5 checkpoint in it",
                           options);
      }
      opts.resume = newest;
    }
    require_checkpoint_file(opts.resume);
    opts.resumed = read_checkpoint_header(opts.resume);
    opts.config = from_entries(opts.resumed->config, opts.resume);
    {
      // A checkpoint at odds with itself is named before the text, which it would misread.
      const RunConfig stored = checkpoint_run_config(opts.resume);
      require_vocabulary_rows(opts.resume, stored,
                              *nn::make_sequence_model(stored.model, stored.net));
    }
    for (const auto& [key, value] : vm) {
      if (value.defaulted() || key == "resume" || key == "config" || key == "overwrite" ||
          key == "report") {
        continue;
      }
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
    const std::string from = fs::path(opts.resume).parent_path().string();
    opts.config.out_dir = !given.out_dir.empty() ? given.out_dir : from.empty() ? "." : from;
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
    if (data::task_kind(opts.config.task.name).own_data) {
      return usage_error("train",
                         "task " + opts.config.task.name +
                             ": a program's own data, which only that program has; gradlab "
                             "train runs " +
                             data::task_names(),
                         options);
    }
  } catch (const ConfigError& e) {
    return usage_error("train", e.what(), options);
  }
  if (const std::string reason = option_of_another_task(vm, command_line, config_file, opts.config);
      !reason.empty()) {
    return refuse(reason);
  }
  if (const int code = check_input_file("train", "--data", opts.config.task.text.data, options);
      code >= 0) {
    return code;
  }
  if (opts.config.out_dir.empty()) opts.config.out_dir = default_out_dir(opts.config);
  if (writer) {
    try {
      opts.claim = claim_run_directory(
          {.dir = opts.config.out_dir,
           .resume = opts.resume,
           .resumed_step = opts.resumed ? std::optional(opts.resumed->train.step) : std::nullopt,
           .overwrite = opts.overwrite});
    } catch (const ConfigError& e) {
      return usage_error("train", e.what(), options);
    }
  }
  try {
    opts.task = prepare_run(opts.config);
  } catch (const ConfigError& e) {
    return refuse(e.what());
  }
  return -1;
}

// parse_train_options() on every process of a group: each parses the same command line (a file may
// still be missing on one host only), the output of each is held back, and only the first process
// that stopped, rank 0 before the others, prints its own. Every process returns the same code.
int parse_in_group(const std::vector<std::string>& args, Options& opts, ProcessGroup& group) {
  if (group.size() == 1) return parse_train_options(args, opts);
  std::ostringstream out, err;
  std::streambuf* const cout_buffer = std::cout.rdbuf(out.rdbuf());
  std::streambuf* const cerr_buffer = std::cerr.rdbuf(err.rdbuf());
  int code;
  try {
    code = parse_train_options(args, opts, group.rank() == 0);
  } catch (const std::exception& e) {
    err << "gradlab train: " << e.what() << '\n';
    code = kExitFailure;
  }
  std::cout.rdbuf(cout_buffer);
  std::cerr.rdbuf(cerr_buffer);
  const std::vector<uint64_t> codes = group.gather(static_cast<uint64_t>(code + 1));
  const auto first = std::find_if(codes.begin(), codes.end(), [](uint64_t c) { return c != 0; });
  if (first == codes.end()) return -1;
  if (first - codes.begin() == group.rank()) {
    std::cout << out.str() << std::flush;
    // Rank 0 speaks for every process; another rank's error is its own: its rank goes in.
    std::string text = err.str();
    const std::string plain = message_prefix("train", ProcessGroup());
    if (group.rank() != 0 && text.starts_with(plain)) {
      text.replace(0, plain.size(), message_prefix("train", group));
    }
    std::cerr << text << std::flush;
  }
  return static_cast<int>(*first) - 1;
}

int parse_train(const Arguments& args, Options& opts) {
  return parse_in_group(args, opts, world());
}

int run_train(Options& opts) {
  ProcessGroup& group = world();
  const bool writer = group.rank() == 0;
  const RunConfig& config = opts.config;
  set_threads(static_cast<int>(config.threads));

  Trainer trainer(config, opts.task);
  if (opts.resumed) trainer.restore(opts.resume);
  if (group.size() > 1) {
    try {
      trainer.distribute(group);
    } catch (const ConfigError& e) {
      if (writer) std::cerr << "gradlab train: " << e.what() << '\n';
      return kExitUsage;
    }
    if (const int code = check_same_start(config, *opts.task, trainer, group); code >= 0) {
      return code;
    }
  }
  if (writer) {
    for (const std::string& f : start_run_directory(config, opts.claim)) {
      std::cerr << "gradlab train: removed " << f << ", left by a save that did not finish\n";
    }
  }

  // fit stops cleanly on SIGINT, SIGTERM and SIGUSR1 (LoopPolicy::stop_on_signal).
  std::optional<StopSignals> hangup;
  if (group.size() > 1) {
    // When mpirun ends a job on SIGINT or SIGTERM, it stops reading the processes' output a
    // second before it signals them, and kills them a second after. The progress line must not
    // block the save in between: output that cannot be written at once is dropped (O_NONBLOCK),
    // a closed output does not end the process (SIGPIPE), and a hang-up only asks for the stop.
    fcntl(STDOUT_FILENO, F_SETFL, fcntl(STDOUT_FILENO, F_GETFL) | O_NONBLOCK);
    std::signal(SIGPIPE, SIG_IGN);
    hangup.emplace(std::initializer_list<int>{SIGHUP});
  }
  Observer quiet;
  std::optional<CliObserver> cli;
  if (writer) cli.emplace(config, *opts.task, trainer.step(), opts.report);
  LoopPolicy policy = loop_policy(config, *opts.task, opts.claim);
  policy.check_replicas_every = config.check_replicas;
  policy.stop_on_signal = true;
  const FitResult result = fit(trainer, policy, cli ? *cli : quiet);
  if (!writer) return result.reason == StopReason::Diverged ? kExitFailure : kExitOk;
  if (result.reason == StopReason::Diverged) {
    std::cerr << "gradlab train: stopped: " << result.error << "; "
              << (result.last_checkpoint.empty()
                      ? "no checkpoint was saved"
                      : "the last good checkpoint is " + result.last_checkpoint)
              << '\n';
    return kExitFailure;
  }
  if (result.reason == StopReason::Signal || result.reason == StopReason::Requested) {
    std::printf("Interrupted after step %lld; saved %s\nResume with: gradlab train --resume %s\n",
                static_cast<long long>(trainer.step()), result.checkpoint.c_str(),
                result.checkpoint.c_str());
    return kExitOk;
  }
  const Metrics& final_metrics = result.last_metrics;
  char accuracy[96] = "";
  if (opts.task->predicts_tokens()) {
    std::snprintf(accuracy, sizeof accuracy, ", %s %.2f%%, exact match %.2f%%",
                  opts.task->accuracy_name().c_str(), 100 * final_metrics.token_accuracy,
                  100 * final_metrics.exact_match);
  }
  std::printf("Trained %lld steps in %.2f s: held-out loss %.4f%s%s\nCheckpoint: %s\nMetrics: %s\n",
              static_cast<long long>(trainer.step() - result.first_step), cli->seconds(),
              final_metrics.loss, accuracy,
              result.reason == StopReason::Target ? " (target reached)" : "",
              result.checkpoint.c_str(), (fs::path(config.out_dir) / "metrics.csv").c_str());
  if (final_metrics.train) {
    std::printf("Training set: loss %.4f, token accuracy %.2f%%\n", final_metrics.train->loss,
                100 * final_metrics.train->token_accuracy);
  }
  for (const PartLoss& part : final_metrics.parts) {
    std::printf("Held-out %s loss %.4f\n", part.name.c_str(), part.loss);
  }
  if (group.size() > 1) {
    std::printf("Processes: %d; summing gradients took %.2f s of rank 0's time (%.1f%%)\n",
                group.size(), cli->sync_seconds(), 100 * cli->sync_seconds() / cli->seconds());
  }
  return kExitOk;
}

const CommandRow train_row{"train",
                           "train a transformer on a toy task or a text file (the main job)",
                           {"--batch-size", "--eval-size", "--length", "--symbols", "--context",
                            "--eval-iters", "--modulus", "--train-fraction", "--d-model", "--d-ff",
                            "--heads", "--layers", "--config", "--resume", "--data"},
                           parse_train,
                           run_train};

}  // namespace

}  // namespace gradlab::cli
