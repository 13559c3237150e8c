// `gradlab train`: flags and --config into a RunConfig, --resume, then train::fit with an
// observer that prints the progress line and writes metrics.csv, and a clean stop on SIGINT,
// SIGTERM or SIGUSR1. Under mpirun every process runs this, and rank 0 alone speaks and writes.
#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "autograd/cpu.h"
#include "data/fingerprint.h"
#include "train/atomic_file.h"
#include "train/cli/commands.h"
#include "train/cli/options.h"
#include "train/cli/run_options.h"
#include "train/fit.h"
#include "train/process_group.h"
#include "train/run_directory.h"

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

// One line per evaluation in metrics.csv, appended (the header when the file is new), each row
// flushed whole: earlier rows are never rewritten, and a row torn by a crash is closed by a
// newline before the next one.
class MetricsLog {
 public:
  explicit MetricsLog(const std::string& path) : path_(path) {
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
              "tokens_per_second,elapsed_seconds,eval_bits_per_token\n";
    }
    if (!out_.flush()) throw FileError(path + ": cannot write to it: " + std::strerror(errno));
  }
  void write(int64_t step, const StepResult& r, const Metrics& m, double tokens_per_second,
             double elapsed) {
    out_ << step << ',' << r.loss << ',' << m.loss << ',' << m.token_accuracy << ','
         << m.exact_match << ',' << r.grad_norm << ',' << r.lr << ',' << tokens_per_second << ','
         << elapsed << ',' << m.loss / std::log(2.0) << '\n';
    if (!out_.flush()) throw FileError(path_ + ": cannot append a row: " + std::strerror(errno));
  }

 private:
  std::string path_;
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

// A process of a group other than rank 0: it only passes on a stop request.
class SignalObserver : public Observer {
 public:
  bool should_stop() override { return stop_requested; }
};

// The command line's view of fit: the progress line, metrics.csv, and the signal flag.
class CliObserver : public SignalObserver {
 public:
  CliObserver(const RunConfig& config, int64_t first_step)
      : metrics_((fs::path(config.out_dir) / "metrics.csv").string()),
        progress_(config.steps, make_task(config)->language_model() != nullptr),
        total_steps_(config.steps),
        first_step_(first_step) {}

  void on_step(int64_t step, const StepResult& result) override {
    tokens_ += static_cast<double>(result.tokens);
    sync_seconds_ += result.sync_seconds;
    measure(step);
    progress_.update(step, result, nullptr, rate_, eta_);
  }
  void on_evaluation(int64_t step, const StepResult& last, const Metrics& metrics) override {
    metrics_.write(step, last, metrics, rate_, elapsed_);
    progress_.update(step, last, &metrics, rate_, eta_);
  }
  void on_stop(const FitResult&) override { progress_.finish(); }

  double seconds() const { return seconds_since_start(); }
  double sync_seconds() const { return sync_seconds_; }

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
  double sync_seconds_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double elapsed_ = 0, rate_ = 0, eta_ = 0;
};

struct Options {
  RunConfig config;
  std::string resume;                            // --resume path
  std::optional<CheckpointData> resumed;         // its contents
  std::shared_ptr<const data::Task> task;        // its data read once (a language model: the file)
  bool overwrite = false;                        // --overwrite
  std::vector<std::string> earlier_checkpoints;  // of the run a resume continues in --out
  // What --overwrite replaces in --out, removed once training is about to start: an earlier
  // run's files, or on a resume the checkpoints and metrics rows after the resumed step.
  std::vector<std::string> replaced;
  int64_t metrics_after = -1;  // metrics rows after this step go too (-1: none)
};

// A directory's run files, for a message: "config.ini, metrics.csv, best.h5 and 2 step
// checkpoints".
std::string describe(const std::vector<std::string>& files) {
  std::vector<std::string> parts;
  int64_t steps = 0;
  for (const std::string& f : files) {
    if (checkpoint_step(f) >= 0) {
      ++steps;
    } else {
      parts.push_back(fs::path(f).filename().string());
    }
  }
  if (steps > 0)
    parts.push_back(std::to_string(steps) + " step checkpoint" + (steps > 1 ? "s" : ""));
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  }
  return text;
}

// Decides whether this run may write into --out without losing earlier work; returns "" or the
// reason it may not. An empty or new directory is free. A resume into the directory it comes
// from continues that run, unless the run saved checkpoints past the resumed step: those would
// be overwritten. Metrics rows past the resumed step without a checkpoint (a run killed between
// an evaluation and its save) are dropped, since the resumed run writes them again, bit for
// bit. --overwrite allows both refusals and records what will be replaced.
std::string claim_run_directory(Options& opts) {
  const std::string& dir = opts.config.out_dir;
  const std::vector<std::string> files = run_files(dir);
  if (files.empty()) return "";
  std::error_code error;
  const fs::path from = fs::path(opts.resume).parent_path();
  const bool resuming_here =
      opts.resumed && fs::equivalent(from.empty() ? fs::path(".") : from, dir, error);
  if (!resuming_here) {
    if (!opts.overwrite) {
      return "--out " + dir + " already holds a run (" + describe(files) + "); resume it with " +
             "--resume " + dir + ", choose another --out, or pass --overwrite to replace it";
    }
    opts.replaced = files;
    return "";
  }
  const int64_t step = opts.resumed->train.step;
  std::vector<std::string> later;
  for (const std::string& f : step_checkpoints(dir)) {
    (checkpoint_step(f) > step ? later : opts.earlier_checkpoints).push_back(f);
  }
  if (!later.empty() && !opts.overwrite) {
    return "--resume " + opts.resume + ": the run in " + dir + " went on past step " +
           std::to_string(step) + " (" + describe(later) + ", the newest " + later.back() +
           "); resume the newest with --resume " + dir +
           ", choose another --out, or pass --overwrite to drop what came after step " +
           std::to_string(step);
  }
  opts.replaced = later;
  if (last_metrics_step(dir) > step) opts.metrics_after = step;
  return "";
}

// Carries out what claim_run_directory recorded for --overwrite, and removes the temporary
// files of saves that died with their process.
void prepare_run_directory(const Options& opts) {
  const std::string& dir = opts.config.out_dir;
  for (const std::string& f : opts.replaced) fs::remove(f);
  if (opts.metrics_after >= 0) {
    const fs::path path = fs::path(dir) / "metrics.csv";
    std::ifstream in(path);
    std::string kept, line;
    while (std::getline(in, line)) {
      const size_t comma = line.find(',');
      const std::string step = line.substr(0, comma);
      const bool row = !step.empty() && step.find_first_not_of("0123456789") == std::string::npos;
      if (!row || std::stoll(step) <= opts.metrics_after) kept += line + '\n';
    }
    replace_file_text(path.string(), kept);
  }
  for (const std::string& f : remove_stale_temp_files(dir, is_run_file)) {
    std::cerr << "gradlab train: removed " << f << ", left by a save that did not finish\n";
  }
}

// Parses flags (and --config FILE); on --resume the checkpoint's configuration is used, with
// only the resumable flags allowed to change. `writer`: this process will write the run's files,
// and decides whether --out may take them. Returns -1 to go on, or an exit code.
int parse(const std::vector<std::string>& args, Options& opts, bool writer = true) {
  po::options_description options(
      "gradlab train: train a transformer on a toy task or a text file\n"
      "Every flag can also be set in a --config file (key = value lines).\nOptions");
  std::string config_file;
  options.add_options()("help,h", "show this help")("config", po::value(&config_file),
                                                    "read options from this file (flags win)")(
      "resume", po::value(&opts.resume),
      "continue the run saved in this checkpoint, or in a run directory's newest one")(
      "overwrite", po::bool_switch(&opts.overwrite),
      "replace the run already in --out (or, on --resume, what came after the resumed step)");
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
  apply_old_names(vm, opts.config);
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
    opts.resumed = read_checkpoint(opts.resume);
    opts.config = from_entries(opts.resumed->config, opts.resume);
    for (const auto& [key, value] : vm) {
      if (value.defaulted() || key == "resume" || key == "config" || key == "overwrite") continue;
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
  if (opts.config.out_dir.empty()) opts.config.out_dir = default_out_dir(opts.config);
  if (writer) {
    if (const std::string refusal = claim_run_directory(opts); !refusal.empty()) {
      return usage_error("train", refusal, options);
    }
  }
  try {
    check_fields(opts.config);  // a usage error costs no time reading the text
    opts.task = prepare_task(opts.config);
    finalize(opts.config);
  } catch (const ConfigError& e) {
    return usage_error("train", e.what(), options);
  }
  return -1;
}

// parse() on every process of a group: each parses the same command line (a file may still be
// missing on one host only), the output of each is held back, and only the first process that
// stopped, rank 0 before the others, prints its own. Every process returns the same code.
int parse_in_group(const std::vector<std::string>& args, Options& opts, ProcessGroup& group) {
  if (group.size() == 1) return parse(args, opts);
  std::ostringstream out, err;
  std::streambuf* const cout_buffer = std::cout.rdbuf(out.rdbuf());
  std::streambuf* const cerr_buffer = std::cerr.rdbuf(err.rdbuf());
  int code;
  try {
    code = parse(args, opts, group.rank() == 0);
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
    std::cerr << (group.rank() == 0 ? "" : rank_label(group) + ": ") << err.str() << std::flush;
  }
  return static_cast<int>(*first) - 1;
}

// The fingerprint of this process's own executable file.
uint64_t binary_fingerprint() {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return data::fingerprint(bytes.data(), bytes.size());
}

// Refuses to train unless every process of the group runs the same gradlab on the same kernel
// variant, configuration, text and starting state (parameters, optimizer, step): processes that
// differ would train different models while summing their gradients. Returns -1 or an exit code.
int check_same_start(const RunConfig& config, const data::Task& task, const Trainer& trainer,
                     ProcessGroup& group) {
  const std::string settings = to_config_file(config);
  const std::vector<std::pair<std::string, uint64_t>> checks = {
      {"gradlab binary", binary_fingerprint()},
      // The variants round alike only within themselves: replicas on different ones would drift
      // apart by an ulp at a time.
      {"kernel instruction set (rank 0 runs " + isa_name(kernel_isa()) +
           "; on processors that differ, set GRADLAB_ISA to the lowest on every process)",
       static_cast<uint64_t>(kernel_isa())},
      {"configuration", data::fingerprint(settings.data(), settings.size())},
      {"text (--data)", task.data_fingerprint()},
      {"starting state (parameters, optimizer, step; on --resume, the checkpoint read)",
       trainer.state_hash()},
  };
  for (const auto& [what, value] : checks) {
    const std::vector<uint64_t> all = group.gather(value);
    const auto other =
        std::find_if(all.begin(), all.end(), [&](uint64_t v) { return v != all[0]; });
    if (other == all.end()) continue;
    if (group.rank() == 0) {
      std::cerr << "gradlab train: rank " << (other - all.begin()) << " of " << group.size()
                << " has a different " << what
                << " than rank 0; every process must run the same gradlab, command line and "
                   "files (see the README: Training on several processes or machines)\n";
    }
    return kExitFailure;
  }
  return -1;
}

}  // namespace

int parse_train(const std::vector<std::string>& args) {
  Options opts;
  return parse(args, opts);
}

int run_train(const std::vector<std::string>& args) {
  ProcessGroup& group = world();
  const bool writer = group.rank() == 0;
  Options opts;
  if (const int code = parse_in_group(args, opts, group); code >= 0) return code;
  const RunConfig& config = opts.config;
  omp_set_num_threads(static_cast<int>(config.threads));

  Trainer trainer(config, opts.task);
  if (opts.resumed) trainer.restore(*opts.resumed, opts.resume);
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
    fs::create_directories(config.out_dir);
    prepare_run_directory(opts);
    replace_file_text((fs::path(config.out_dir) / "config.ini").string(), to_config_file(config));
  }

  std::signal(SIGINT, request_stop);
  std::signal(SIGTERM, request_stop);
  // mpirun forwards SIGUSR1 to every process, where SIGINT and SIGTERM make it end the job
  // with status 1 whatever the processes do: SIGUSR1 is the clean stop of a group.
  std::signal(SIGUSR1, request_stop);
  if (group.size() > 1) {
    // When mpirun ends a job on SIGINT or SIGTERM, it stops reading the processes' output a
    // second before it signals them, and kills them a second after. The progress line must not
    // block the save in between: output that cannot be written at once is dropped (O_NONBLOCK),
    // a closed output does not end the process (SIGPIPE), and a hang-up only asks for the stop.
    fcntl(STDOUT_FILENO, F_SETFL, fcntl(STDOUT_FILENO, F_GETFL) | O_NONBLOCK);
    std::signal(SIGPIPE, SIG_IGN);
    std::signal(SIGHUP, request_stop);
  }
  SignalObserver quiet;
  std::optional<CliObserver> cli;
  if (writer) cli.emplace(config, trainer.step());
  const LoopPolicy policy{.steps = config.steps,
                          .eval_every = config.eval_every,
                          .target_exact_match = config.target_exact_match,
                          .best_by_loss = make_task(config)->language_model() != nullptr,
                          .out_dir = config.out_dir,
                          .save_every = config.save_every,
                          .keep = config.keep,
                          .earlier_checkpoints = opts.earlier_checkpoints,
                          .check_replicas_every = config.check_replicas};
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
      static_cast<long long>(trainer.step() - result.first_step), cli->seconds(),
      final_metrics.loss, 100 * final_metrics.token_accuracy, 100 * final_metrics.exact_match,
      result.reason == StopReason::Target ? " (target reached)" : "", result.checkpoint.c_str(),
      (fs::path(config.out_dir) / "metrics.csv").c_str());
  if (group.size() > 1) {
    std::printf("Processes: %d; summing gradients took %.2f s of rank 0's time (%.1f%%)\n",
                group.size(), cli->sync_seconds(), 100 * cli->sync_seconds() / cli->seconds());
  }
  return kExitOk;
}

}  // namespace gradlab::cli
