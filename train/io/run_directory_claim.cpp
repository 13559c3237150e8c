// Claiming a run directory (run_directory_claim.h).
#include "train/io/run_directory_claim.h"

#include <filesystem>
#include <fstream>

#include "autograd/error.h"
#include "io/atomic_file.h"
#include "train/io/run_directory.h"

namespace gradlab::train {
namespace {

namespace fs = std::filesystem;

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

// Keeps metrics.csv's header, and its rows up to step `last`.
void drop_metrics_after(const fs::path& path, int64_t last) {
  std::ifstream in(path);
  std::string kept, line;
  while (std::getline(in, line)) {
    const size_t comma = line.find(',');
    const std::string step = line.substr(0, comma);
    const bool row = !step.empty() && step.find_first_not_of("0123456789") == std::string::npos;
    if (!row || std::stoll(step) <= last) kept += line + '\n';
  }
  io::replace_file_text(path.string(), kept);
}

}  // namespace

RunDirectoryClaim claim_run_directory(const RunDirectory& run) {
  const std::string& dir = run.dir;
  RunDirectoryClaim claim;
  const std::vector<std::string> files = run_files(dir);
  if (files.empty()) return claim;
  std::error_code error;
  const fs::path from = fs::path(run.resume).parent_path();
  const bool resuming_here =
      run.resumed_step && fs::equivalent(from.empty() ? fs::path(".") : from, dir, error);
  if (!resuming_here) {
    if (!run.overwrite) {
      throw ConfigError("--out " + dir + " already holds a run (" + describe(files) +
                        "); resume it with " + "--resume " + dir +
                        ", choose another --out, or pass --overwrite to replace it");
    }
    claim.replaced = files;
    return claim;
  }
  const int64_t step = *run.resumed_step;
  std::vector<std::string> later;
  for (const std::string& f : step_checkpoints(dir)) {
    (checkpoint_step(f) > step ? later : claim.earlier_checkpoints).push_back(f);
  }
  if (!later.empty() && !run.overwrite) {
    throw ConfigError("--resume " + run.resume + ": the run in " + dir + " went on past step " +
                      std::to_string(step) + " (" + describe(later) + ", the newest " +
                      later.back() + "); resume the newest with --resume " + dir +
                      ", choose another --out, or pass --overwrite to drop what came after step " +
                      std::to_string(step));
  }
  claim.replaced = later;
  if (last_metrics_step(dir) > step) claim.metrics_after = step;
  return claim;
}

std::vector<std::string> prepare_run_directory(const std::string& dir,
                                               const RunDirectoryClaim& claim) {
  fs::create_directories(dir);
  for (const std::string& f : claim.replaced) fs::remove(f);
  if (claim.metrics_after >= 0)
    drop_metrics_after(fs::path(dir) / "metrics.csv", claim.metrics_after);
  return io::remove_stale_temp_files(dir, is_run_file);
}

}  // namespace gradlab::train
