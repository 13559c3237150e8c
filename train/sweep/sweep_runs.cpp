// A sweep's runs on disk and its results.csv (sweep_runs.h).
#include "train/sweep/sweep_runs.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>

#include "autograd/error.h"
#include "autograd/format.h"
#include "io/atomic_file.h"
#include "train/config.h"
#include "train/io/run_directory.h"

namespace gradlab::train {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> cells;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    cells.push_back(line.substr(start, comma - start));
    if (comma == std::string::npos) return cells;
    start = comma + 1;
  }
}

// The number in a cell, or nullopt for an empty or torn one.
std::optional<double> number(const std::string& cell) {
  if (cell.empty()) return std::nullopt;
  try {
    size_t used = 0;
    const double value = std::stod(cell, &used);
    if (used != cell.size()) return std::nullopt;
    return value;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// metrics.csv's exact_match at step, or nullopt without a whole row for it.
std::optional<double> exact_match_at(const std::string& dir, int64_t step) {
  std::ifstream in(fs::path(dir) / "metrics.csv");
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = split_csv_line(line);
  const auto column = std::find(header.begin(), header.end(), "exact_match") - header.begin();
  std::optional<double> found;
  while (std::getline(in, line)) {
    const std::vector<std::string> cells = split_csv_line(line);
    if (cells.size() != header.size() || number(cells[0]) != static_cast<double>(step)) continue;
    found = number(cells[static_cast<size_t>(column)]);
  }
  return found;
}

std::string csv_cell(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (const char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// The cells quoted where they must be, joined by commas, and a newline.
std::string csv_row(const std::vector<std::string>& cells) {
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i > 0) line += ',';
    line += csv_cell(cells[i]);
  }
  line += '\n';
  return line;
}

}  // namespace

RunState run_state(const std::string& dir) {
  if (run_files(dir).empty()) return RunState::New;
  const std::string newest = newest_readable_checkpoint(dir);
  if (newest.empty()) return RunState::Started;
  const CheckpointHeader header = read_checkpoint_header(newest);
  const RunConfig config = from_entries(header.config, newest);
  const int64_t step = header.train.step;
  if (step >= config.steps) return RunState::Finished;
  if (config.target_exact_match > 0) {
    const std::optional<double> scored = exact_match_at(dir, step);
    if (scored && *scored >= config.target_exact_match) return RunState::Finished;
  }
  return RunState::Resumable;
}

std::optional<RunSummary> summarize_metrics(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  const std::vector<std::string> header = split_csv_line(line);
  const auto column = [&](const char* name) {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end()) throw FileError(path + ": no column " + name);
    return static_cast<size_t>(it - header.begin());
  };
  const size_t step = column("step"), train_loss = column("train_loss"),
               eval_loss = column("eval_loss"), accuracy = column("token_accuracy"),
               exact = column("exact_match"), elapsed = column("elapsed_seconds");
  std::optional<RunSummary> summary;
  double stretch = 0;  // elapsed_seconds of the last row of the current stretch
  while (std::getline(in, line)) {
    const std::vector<std::string> cells = split_csv_line(line);
    if (cells.size() != header.size()) continue;
    const std::optional<double> values[] = {number(cells[step]),      number(cells[train_loss]),
                                            number(cells[eval_loss]), number(cells[accuracy]),
                                            number(cells[exact]),     number(cells[elapsed])};
    if (std::any_of(std::begin(values), std::end(values), [](auto v) { return !v; })) continue;
    if (!summary) {
      summary.emplace();
      summary->best_eval_loss = std::numeric_limits<double>::infinity();
    }
    RunSummary& s = *summary;
    s.steps = static_cast<int64_t>(*values[0]);
    s.final_train_loss = *values[1];
    s.final_eval_loss = *values[2];
    s.final_token_accuracy = *values[3];
    s.final_exact_match = *values[4];
    s.best_eval_loss = std::min(s.best_eval_loss, *values[2]);
    s.best_token_accuracy = std::max(s.best_token_accuracy, *values[3]);
    s.best_exact_match = std::max(s.best_exact_match, *values[4]);
    if (*values[5] < stretch) s.wall_seconds += stretch;
    stretch = *values[5];
  }
  if (summary) summary->wall_seconds += stretch;
  return summary;
}

std::string run_status(const std::string& dir, const SweepSpec& spec, const std::string& name) {
  if (std::find(spec.failed.begin(), spec.failed.end(), name) != spec.failed.end()) {
    return "failed";
  }
  switch (run_state(dir)) {
    case RunState::New:
      return "pending";
    case RunState::Finished:
      return "finished";
    default:
      return "stopped";
  }
}

void write_results_csv(const std::string& dir, const SweepSpec& spec) {
  std::vector<std::string> header{"name"};
  for (const GridAxis& axis : spec.grid) header.push_back(axis.key);
  for (const char* column : {"seed", "status", "steps", "final_train_loss", "final_eval_loss",
                             "best_eval_loss", "final_token_accuracy", "best_token_accuracy",
                             "final_exact_match", "best_exact_match", "wall_seconds"}) {
    header.emplace_back(column);
  }
  std::string text = csv_row(header);
  for (const SweepPoint& point : sweep_points(spec.grid, spec.seeds)) {
    const std::string name = point.name();
    const std::string run = (fs::path(dir) / name).string();
    std::vector<std::string> cells{name};
    for (const auto& [key, value] : point.values) cells.push_back(value);
    cells.push_back(std::to_string(point.seed));
    cells.push_back(run_status(run, spec, name));
    const std::optional<RunSummary> s = summarize_metrics((fs::path(run) / "metrics.csv").string());
    if (s) {
      cells.push_back(std::to_string(s->steps));
      for (const double v :
           {s->final_train_loss, s->final_eval_loss, s->best_eval_loss, s->final_token_accuracy,
            s->best_token_accuracy, s->final_exact_match, s->best_exact_match, s->wall_seconds}) {
        cells.push_back(format_number(v));
      }
    }
    cells.resize(header.size());
    text += csv_row(cells);
  }
  io::replace_file_text((fs::path(dir) / "results.csv").string(), text);
}

}  // namespace gradlab::train
