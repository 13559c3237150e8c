// `gradlab sweep`: the cross product of --grid values and --seeds as ordinary run directories
// under --out, each trained by a `gradlab train` child process (--jobs at once), resumable by
// running the same command again; DIR/sweep.json records the sweep, DIR/results.csv a row per
// run. The grid, the runs on disk and the children are train/sweep/'s; this file checks the
// command line, every run's included, before anything runs.
#include <filesystem>
#include <iostream>
#include <sstream>

#include "autograd/error.h"
#include "autograd/format.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/run_options.h"
#include "io/atomic_file.h"
#include "train/sweep/child_runs.h"
#include "train/sweep/sweep_runs.h"

namespace gradlab::cli {
namespace {

namespace fs = std::filesystem;
namespace po = boost::program_options;
using namespace train;

// Runs at most; each is checked as gradlab train checks its flags before anything starts.
constexpr size_t kMaxRuns = 10000;

struct SweepArgs {
  SweepArgs() {
    own.add_options()("help,h", "show this help")(
        "config", po::value(&spec.config), "every run's base config file (gradlab train --config)")(
        "grid", po::value(&grid_texts)->composing(),
        "KEY=V1,V2,...: a flag of gradlab train and its values, one run each; several --grid "
        "make a cross product")("seeds", po::value(&spec.seeds)->default_value(1),
                                "runs of each grid point, with --seed 0 to N-1")(
        "out", po::value(&dir)->required(),
        "the sweep's directory: a run directory per run, sweep.json and results.csv")(
        "jobs", po::value(&jobs)->default_value(1), "runs at once, each a gradlab train process")(
        "extend", po::bool_switch(&extend),
        "add the new values of a --grid, or more seeds, to the sweep already in --out");
    add_threads_option(own, spec.threads);
    po::options_description run_flags;
    add_run_options(run_flags, run_config);
    for (const auto& option : run_flags.options()) {
      if (option->long_name() != "out" && option->long_name() != "threads") train_flags.add(option);
    }
    options.add(own).add(train_flags);
  }
  po::options_description own{
      "gradlab sweep: train a grid of runs (gradlab train), several at once, resumably\n"
      "Run the same command again to go on after a stop; --threads sets each run's threads;\n"
      "results.csv holds a row per run.\n"
      "Options"};
  po::options_description train_flags{"Flags of gradlab train, given to every run"};
  po::options_description options;
  RunConfig run_config;  // what train_flags bind to; the runs read their flags as given
  std::vector<std::string> grid_texts;
  std::string dir;
  int64_t jobs = 1;
  bool extend = false;
  SweepSpec spec;
  std::vector<SweepPoint> points;
  std::vector<ChildRun> runs;  // the runs to start, in order
  std::vector<std::string> run_names;
  size_t already_finished = 0;
};

// The train flags given, as typed ("--steps", "20"), and their keys.
std::vector<std::string> given_train_flags(const Arguments& args, const SweepArgs& a,
                                           std::vector<std::string>& keys) {
  std::vector<std::string> flags;
  const po::parsed_options parsed = po::command_line_parser(args).options(a.options).run();
  for (const po::option& o : parsed.options) {
    if (!a.train_flags.find_nothrow(o.string_key, false)) continue;
    keys.push_back(o.string_key);
    flags.push_back("--" + o.string_key);
    flags.insert(flags.end(), o.value.begin(), o.value.end());
  }
  return flags;
}

// The gradlab train arguments of a point's run in state `state`.
std::vector<std::string> train_args(const SweepArgs& a, const SweepPoint& point, RunState state) {
  const std::string out = (fs::path(a.dir) / point.name()).string();
  const std::string threads = std::to_string(a.spec.threads);
  if (state == RunState::Resumable) return {"--resume", out, "--threads", threads};
  std::vector<std::string> args;
  if (!a.spec.config.empty()) args.insert(args.end(), {"--config", a.spec.config});
  args.insert(args.end(), a.spec.flags.begin(), a.spec.flags.end());
  for (const auto& [key, value] : point.values) args.insert(args.end(), {"--" + key, value});
  args.insert(args.end(),
              {"--seed", std::to_string(point.seed), "--threads", threads, "--out", out});
  // A run killed before its first checkpoint starts again; its files are this sweep's own.
  if (state == RunState::Started) args.push_back("--overwrite");
  return args;
}

// gradlab train's own checks of a run's arguments, its messages held back: "" or the reason.
std::string train_refuses(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  std::streambuf* const cout_buffer = std::cout.rdbuf(out.rdbuf());
  std::streambuf* const cerr_buffer = std::cerr.rdbuf(err.rdbuf());
  int code;
  try {
    code = find_command("train")->parse(args);
  } catch (...) {
    std::cout.rdbuf(cout_buffer);
    std::cerr.rdbuf(cerr_buffer);
    throw;
  }
  std::cout.rdbuf(cout_buffer);
  std::cerr.rdbuf(cerr_buffer);
  if (code < 0) return "";
  std::string reason = err.str().substr(0, err.str().find('\n'));
  const std::string prefix = "gradlab train: ";
  if (reason.starts_with(prefix)) reason.erase(0, prefix.size());
  return reason;
}

int parse_sweep(const Arguments& args, SweepArgs& a) {
  po::variables_map vm;
  if (const int code = parse_or_usage("sweep", args, a.options, vm); code >= 0) return code;
  const auto refuse = [&](const std::string& reason) {
    return usage_error("sweep", reason, a.options);
  };
  if (const int code = check_threads("sweep", a.spec.threads, a.options); code >= 0) return code;
  if (a.jobs < 1) return refuse("--jobs " + std::to_string(a.jobs) + ": must be at least 1");
  std::vector<std::string> given;
  a.spec.flags = given_train_flags(args, a, given);
  for (const std::string& key : given) {
    if (key == "seed") return refuse("--seed: the seeds are counted by --seeds N (0 to N-1)");
  }
  try {
    for (const std::string& text : a.grid_texts) {
      GridAxis axis = parse_grid_axis(text);
      if (axis.key == "out" || axis.key == "threads") {
        return refuse("--grid " + quote(text) + ": --" + axis.key +
                      " is the sweep's own flag, not one a grid can vary");
      }
      if (axis.key != "seed" && !a.train_flags.find_nothrow(axis.key, false)) {
        return refuse("--grid " + quote(text) + ": " + quote(axis.key) +
                      " is not a flag of gradlab train (gradlab train --help lists them)");
      }
      if (std::find(given.begin(), given.end(), axis.key) != given.end()) {
        return refuse("--grid " + quote(text) + ": --" + axis.key +
                      " is given as a flag too; give it once");
      }
      a.spec.grid.push_back(std::move(axis));
    }
    if (a.spec.seeds > static_cast<int64_t>(kMaxRuns)) {
      return refuse("--seeds " + std::to_string(a.spec.seeds) + ": at most " +
                    std::to_string(kMaxRuns) + " runs");
    }
    double runs = static_cast<double>(a.spec.seeds);
    for (const GridAxis& axis : a.spec.grid) runs *= static_cast<double>(axis.values.size());
    if (runs > kMaxRuns) {
      return refuse("the grid and --seeds make " + format_number(runs) + " runs, above " +
                    std::to_string(kMaxRuns));
    }
    a.points = sweep_points(a.spec.grid, a.spec.seeds);
    const fs::path record = fs::path(a.dir) / "sweep.json";
    std::error_code error;
    if (fs::exists(record, error)) {
      const SweepSpec before = read_sweep_json(record.string());
      check_same_sweep(before, a.spec, a.extend);
      a.spec.failed = before.failed;
    } else if (fs::exists(a.dir, error) &&
               (!fs::is_directory(a.dir, error) || !fs::is_empty(a.dir, error))) {
      return refuse("--out " + a.dir +
                    " already exists and holds no sweep (no sweep.json); choose another --out");
    }
  } catch (const ConfigError& e) {
    return refuse(e.what());
  } catch (const FileError& e) {
    return refuse(e.what());
  }
  for (const SweepPoint& point : a.points) {
    const std::string name = point.name();
    const std::string run = (fs::path(a.dir) / name).string();
    const auto& failed = a.spec.failed;
    const RunState state = run_state(run);
    if (state == RunState::Finished ||
        std::find(failed.begin(), failed.end(), name) != failed.end()) {
      a.already_finished += state == RunState::Finished;
      continue;
    }
    const std::vector<std::string> args = train_args(a, point, state);
    if (const std::string reason = train_refuses(args); !reason.empty()) {
      return refuse("run " + name + ": " + reason);
    }
    a.runs.push_back({std::vector<std::string>{"train"}, (fs::path(run) / "train.log").string()});
    a.runs.back().args.insert(a.runs.back().args.end(), args.begin(), args.end());
    a.run_names.push_back(name);
  }
  return -1;
}

std::string run_line(const std::string& dir, const std::string& name, int code) {
  const fs::path run = fs::path(dir) / name;
  if (code > 0) {
    return name + ": failed (exit " + std::to_string(code) + "; see " +
           (run / "train.log").string() + ")";
  }
  if (run_state(run.string()) != RunState::Finished) return name + ": stopped";
  const std::optional<RunSummary> s = summarize_metrics((run / "metrics.csv").string());
  if (!s) return name + ": finished";
  char numbers[160];
  std::snprintf(numbers, sizeof numbers,
                ": finished at step %lld, held-out loss %.4f, token accuracy %.2f%%, %.1f s",
                static_cast<long long>(s->steps), s->final_eval_loss, 100 * s->final_token_accuracy,
                s->wall_seconds);
  return name + numbers;
}

int run_sweep(SweepArgs& a) {
  fs::create_directories(a.dir);
  const std::string record = (fs::path(a.dir) / "sweep.json").string();
  io::replace_file_text(record, sweep_json(a.spec));
  for (const ChildRun& run : a.runs) fs::create_directories(fs::path(run.log).parent_path());
  std::printf("Sweep %s: %zu runs, %zu finished before, %zu to run, %lld at once\n", a.dir.c_str(),
              a.points.size(), a.already_finished, a.runs.size(), static_cast<long long>(a.jobs));
  std::fflush(stdout);
  size_t ended = 0, failed = 0;
  const bool whole = run_children(
      fs::read_symlink("/proc/self/exe").string(), a.runs, a.jobs, [&](size_t index, int code) {
        const std::string& name = a.run_names[index];
        if (code > 0) {
          ++failed;
          a.spec.failed.push_back(name);
          io::replace_file_text(record, sweep_json(a.spec));
        }
        write_results_csv(a.dir, a.spec);
        std::printf("[%zu/%zu] %s\n", ++ended, a.runs.size(), run_line(a.dir, name, code).c_str());
        std::fflush(stdout);
      });
  write_results_csv(a.dir, a.spec);
  const std::string results = (fs::path(a.dir) / "results.csv").string();
  if (!whole) {
    std::printf(
        "Stopped; the runs save and stop. Go on with the same command.\nResults so far: %s\n",
        results.c_str());
    return kExitOk;
  }
  std::printf("Results: %s\n", results.c_str());
  if (failed > 0 || !a.spec.failed.empty()) {
    std::cerr << "gradlab sweep: " << a.spec.failed.size()
              << " run(s) failed (results.csv says which; a run's train.log says why); remove a "
                 "failed run's directory to run it again\n";
    return kExitFailure;
  }
  return kExitOk;
}

const CommandRow sweep_row{"sweep",
                           "train a grid of runs (every train flag, times seeds) in parallel, "
                           "resumably, with a table of their results",
                           {"--jobs", "--grid", "--seeds"},
                           parse_sweep,
                           run_sweep};

}  // namespace
}  // namespace gradlab::cli
