// The training loop and its checkpoint files.
#include "train/fit.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

namespace gradlab::train {

namespace fs = std::filesystem;

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
  // This run's step checkpoints, oldest first: the only ones pruning may delete.
  std::vector<std::string> written = policy.earlier_checkpoints;
  auto save_step = [&] {
    const std::string path = step_checkpoint_path(policy.out_dir, trainer.step());
    if (last_saved != path) save(path);
    if (std::find(written.begin(), written.end(), path) == written.end()) written.push_back(path);
    while (static_cast<int64_t>(written.size()) > policy.keep) {
      fs::remove(written.front());
      written.erase(written.begin());
    }
    return path;
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
    if (saving && policy.save_every > 0 && step % policy.save_every == 0) save_step();
  }
  result.reason = reached     ? StopReason::Target
                  : requested ? StopReason::Requested
                              : StopReason::Steps;
  if (saving) result.checkpoint = save_step();
  result.last_checkpoint = last_saved;
  observer.on_stop(result);
  return result;
}

}  // namespace gradlab::train
