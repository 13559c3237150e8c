#include "train/io/run_directory.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "autograd/error.h"
#include "train/checkpoint.h"

namespace gradlab::train {

namespace fs = std::filesystem;

bool is_run_file(const std::string& name) {
  return name == "config.ini" || name == "metrics.csv" || name == "best.h5" ||
         checkpoint_step(name) >= 0;
}

int64_t checkpoint_step(const std::string& path) {
  const std::string name = fs::path(path).filename().string();
  if (name.size() < 10 || !name.starts_with("step-") || !name.ends_with(".h5")) return -1;
  const std::string digits = name.substr(5, name.size() - 8);
  if (digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) {
    return -1;
  }
  return std::stoll(digits);
}

std::vector<std::string> run_files(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (is_run_file(entry.path().filename().string())) files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> step_checkpoints(const std::string& dir) {
  std::vector<std::string> steps;
  for (const std::string& file : run_files(dir)) {
    if (checkpoint_step(file) >= 0) steps.push_back(file);
  }
  std::sort(steps.begin(), steps.end(), [](const std::string& a, const std::string& b) {
    return checkpoint_step(a) < checkpoint_step(b);
  });
  return steps;
}

std::string newest_readable_checkpoint(const std::string& dir) {
  const std::vector<std::string> steps = step_checkpoints(dir);
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    try {
      read_checkpoint(*it);
      return *it;
    } catch (const CheckpointError&) {
      // a damaged or partial file: the one before it may be whole
    }
  }
  return "";
}

int64_t last_metrics_step(const std::string& dir) {
  std::ifstream in(fs::path(dir) / "metrics.csv");
  int64_t last = -1;
  std::string line;
  while (std::getline(in, line)) {
    const size_t comma = line.find(',');
    const std::string step = line.substr(0, comma);
    if (step.empty() || step.size() > 18 ||
        step.find_first_not_of("0123456789") != std::string::npos) {
      continue;  // the header, or a torn row
    }
    last = std::max(last, static_cast<int64_t>(std::stoll(step)));
  }
  return last;
}

}  // namespace gradlab::train
