// The training loop and its checkpoint files.
#include "train/fit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <vector>

#include "autograd/format.h"
#include "train/stop_signals.h"

namespace gradlab::train {
namespace {

namespace fs = std::filesystem;

// fit.h's divergence rules: the loss's running level carries on from the trainer's (a resumed
// run's from its checkpoint), the parameters' norm is this call's.
class DivergenceWatch {
 public:
  DivergenceWatch(double loss_level, double parameter_norm, bool stop_on_spike)
      : stop_on_spike_(stop_on_spike), level_(loss_level), saved_norm_(parameter_norm) {}

  // Throws Divergence if the loss of this step is far above the running level (when spikes
  // stop the run); else adds it.
  void check_loss(int64_t step, double loss) {
    const bool seen = !std::isnan(level_);
    if (stop_on_spike_ && seen && loss > kSpikeFactor * level_ && loss > level_ + kSpikeMargin) {
      throw Divergence("loss " + format_number(loss) + " at step " + std::to_string(step) +
                       " is far above its running level " + format_number(level_));
    }
    level_ = seen ? kDecay * level_ + (1 - kDecay) * loss : loss;
  }
  // NaN before the first loss.
  double loss_level() const { return level_; }

  // Throws Divergence if the parameters, about to be saved, are not finite or exploded.
  void check_parameters(int64_t step, double norm) {
    if (!std::isfinite(norm)) {
      throw Divergence("the parameters are not finite at step " + std::to_string(step));
    }
    if (norm > kGrowth * saved_norm_) {
      throw Divergence("the parameters' norm grew from " + format_number(saved_norm_) + " to " +
                       format_number(norm) + " by step " + std::to_string(step));
    }
    saved_norm_ = norm;
  }

 private:
  static constexpr double kSpikeFactor = 4, kSpikeMargin = 1, kDecay = 0.9, kGrowth = 10;
  bool stop_on_spike_;
  double level_, saved_norm_;
};

}  // namespace

std::string step_checkpoint_path(const std::string& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%06lld.h5", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

FitResult fit(Trainer& trainer, const LoopPolicy& policy, Observer& observer) {
  FitResult result;
  result.first_step = trainer.step();
  ProcessGroup& group = trainer.group();
  const bool saving = !policy.out_dir.empty();
  // In a group, every process takes the same decisions, but only rank 0 writes the files.
  const bool writer = saving && group.rank() == 0;
  if (writer) fs::create_directories(policy.out_dir);
  DivergenceWatch watch(trainer.loss_level(), global_norm(trainer.model().parameters()),
                        policy.stop_on_loss_spike);
  std::string last_saved;
  // The image of the current step's state, kept until the next step: a step that saves best.h5
  // and its step checkpoint builds the file once.
  std::optional<CheckpointImage> image;
  auto save = [&](const std::string& path) {
    watch.check_parameters(trainer.step(), global_norm(trainer.model().parameters()));
    if (writer) {
      if (!image) image.emplace(path, trainer.checkpoint());
      image->write_to(path);
    }
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
      if (writer) fs::remove(written.front());
      written.erase(written.begin());
    }
    return path;
  };

  std::optional<StopSignals> signals;
  if (policy.stop_on_signal) signals.emplace(std::initializer_list<int>{SIGINT, SIGTERM, SIGUSR1});
  bool reached = false, requested = false, signalled = false;
  // A stop signal on any process of the group, or a stop request: asked after every step.
  auto stop = [&] {
    const bool asked = observer.should_stop();
    const bool signal = signals && StopSignals::received() != 0;
    if (!group.any(asked || signal)) return false;
    // The reason is agreed too, so that every process returns the same result.
    signalled = group.any(signal);
    requested = !signalled;
    return true;
  };
  try {
    while (trainer.step() < policy.steps && !reached && !stop()) {
      image.reset();
      result.last_step = trainer.train_step();
      const int64_t step = trainer.step();
      if (policy.check_replicas_every > 0 && step % policy.check_replicas_every == 0) {
        trainer.check_replicas();
      }
      watch.check_loss(step, result.last_step.loss);
      trainer.set_loss_level(watch.loss_level());
      observer.on_step(step, result.last_step);
      if (step % policy.eval_every == 0 || step == policy.steps) {
        result.last_metrics = trainer.evaluate();
        observer.on_evaluation(step, result.last_step, result.last_metrics);
        const bool best = trainer.record_metric(
            policy.best_by_loss ? -result.last_metrics.loss : result.last_metrics.exact_match);
        if (saving && best) save((fs::path(policy.out_dir) / "best.h5").string());
        reached = policy.target_exact_match > 0 &&
                  result.last_metrics.exact_match >= policy.target_exact_match;
      }
      if (saving && policy.save_every > 0 && step % policy.save_every == 0) save_step();
    }
    if (saving) result.checkpoint = save_step();
  } catch (const Divergence& e) {
    result.reason = StopReason::Diverged;
    result.error = e.what();
    result.checkpoint.clear();
    result.last_checkpoint = last_saved;
    observer.on_stop(result);
    return result;
  }
  result.reason = reached     ? StopReason::Target
                  : signalled ? StopReason::Signal
                  : requested ? StopReason::Requested
                              : StopReason::Steps;
  result.last_checkpoint = last_saved;
  observer.on_stop(result);
  return result;
}

}  // namespace gradlab::train
