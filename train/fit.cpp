// The training loop and its checkpoint files.
#include "train/fit.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

namespace gradlab::train {
namespace {

namespace fs = std::filesystem;

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

}  // namespace

std::string step_checkpoint_path(const std::string& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%06lld.h5", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

FitResult fit(Trainer& trainer, const LoopPolicy& policy, Observer& observer) {
  FitResult result;
  result.first_step = trainer.step();
  const bool saving = !policy.out_dir.empty();
  if (saving) fs::create_directories(policy.out_dir);
  std::string last_saved;
  auto save = [&](const std::string& path) {
    save_checkpoint(path, trainer.checkpoint());
    last_saved = path;
    observer.on_checkpoint(trainer.step(), path);
  };

  bool reached = false, requested = false;
  while (trainer.step() < policy.steps && !reached && !(requested = observer.should_stop())) {
    try {
      result.last_step = trainer.train_step();
    } catch (const NonFiniteLoss& e) {
      result.reason = StopReason::Diverged;
      result.error = e.what();
      result.last_checkpoint = last_saved;
      observer.on_stop(result);
      return result;
    }
    const int64_t step = trainer.step();
    observer.on_step(step, result.last_step);
    if (step % policy.eval_every == 0 || step == policy.steps) {
      result.last_metrics = trainer.evaluate();
      observer.on_evaluation(step, result.last_step, result.last_metrics);
      const double previous_best = trainer.best_metric();
      trainer.record_metric(policy.best_by_loss ? -result.last_metrics.loss
                                                : result.last_metrics.exact_match);
      if (saving && trainer.best_metric() > previous_best) {
        save((fs::path(policy.out_dir) / "best.h5").string());
      }
      reached =
          policy.target_accuracy > 0 && result.last_metrics.exact_match >= policy.target_accuracy;
    }
    if (saving && policy.save_every > 0 && step % policy.save_every == 0) {
      save(step_checkpoint_path(policy.out_dir, step));
      prune_checkpoints(policy.out_dir, policy.keep);
    }
  }
  result.reason = reached     ? StopReason::Target
                  : requested ? StopReason::Requested
                              : StopReason::Steps;
  if (saving) {
    result.checkpoint = step_checkpoint_path(policy.out_dir, trainer.step());
    if (last_saved != result.checkpoint) save(result.checkpoint);
    prune_checkpoints(policy.out_dir, policy.keep);
  }
  result.last_checkpoint = last_saved;
  observer.on_stop(result);
  return result;
}

}  // namespace gradlab::train
