// train::fit: the one training loop. It owns the policy every run follows (evaluation cadence,
// best-model tracking, the stop at a target, checkpoint saving and pruning, the stop on a
// divergence); an Observer sees each event and is how a program reports progress or asks
// the loop to stop. The command line and the tests run their training through it.
#pragma once

#include <string>
#include <vector>

#include "train/trainer.h"

namespace gradlab::train {

struct LoopPolicy {
  int64_t steps = 3000;              // train until trainer.step() reaches this
  int64_t eval_every = 50;           // evaluate every N steps, and at the last step
  double target_exact_match = 0.99;  // stop once held-out exact match reaches it; 0: never
  // Which model best.h5 keeps: the highest held-out exact match (toy tasks) or, for a language
  // model, whose windows are never all right, the lowest held-out loss.
  bool best_by_loss = false;
  // Directory for checkpoints: best.h5 at every new best (see best_by_loss), step-NNNNNN.h5 every
  // save_every steps (0: none) and at the end, the newest `keep` of those kept. Empty: no files.
  std::string out_dir;
  int64_t save_every = 0;
  int64_t keep = 3;
  // Step checkpoints already in out_dir that belong to this run (those of the run a resume
  // continues), oldest first. Pruning counts them with the ones fit writes; no other file is
  // ever deleted.
  std::vector<std::string> earlier_checkpoints;
  // In a group of processes (Trainer::distribute): compare every process's state every N steps
  // (Trainer::check_replicas; a mismatch stops the run as a divergence). 0: never.
  int64_t check_replicas_every = 0;
  // Stop cleanly on SIGINT, SIGTERM or SIGUSR1 (which mpirun forwards to every process, where
  // SIGINT and SIGTERM make it end the job whatever the processes do): the signal no longer ends
  // the process while fit runs; the step under way finishes, the final checkpoint is saved as at
  // the last step, and the result says StopReason::Signal. The previous handlers are put back
  // when fit returns. In a group, a signal to any process stops all after the same step.
  bool stop_on_signal = false;
  // The loss-spike rule below; false leaves it out (the other rules stay).
  bool stop_on_loss_spike = true;
};

enum class StopReason {
  Steps,      // reached policy.steps
  Target,     // held-out exact match reached policy.target_exact_match
  Requested,  // the observer asked to stop
  Signal,     // a stop signal arrived (LoopPolicy::stop_on_signal)
  Diverged,   // a divergence rule (below) stopped the run
};

struct FitResult {
  StopReason reason = StopReason::Steps;
  int64_t first_step = 0;       // trainer.step() when fit started
  StepResult last_step;         // the last applied step's result
  Metrics last_metrics;         // the last evaluation's metrics (zeros if none ran)
  std::string checkpoint;       // the final checkpoint (empty without out_dir or on Diverged)
  std::string last_checkpoint;  // the newest checkpoint saved before a divergence, if any
  std::string error;            // what diverged (Diverged only)
};

// Callbacks of the loop, each a no-op by default.
class Observer {
 public:
  virtual ~Observer() = default;
  virtual void on_step(int64_t /*step*/, const StepResult& /*result*/) {}
  virtual void on_evaluation(int64_t /*step*/, const StepResult& /*last*/,
                             const Metrics& /*metrics*/) {}
  virtual void on_checkpoint(int64_t /*step*/, const std::string& /*path*/) {}
  virtual void on_stop(const FitResult& /*result*/) {}
  // Asked after every step; true ends the loop as if the steps had run out (and saves).
  virtual bool should_stop() { return false; }
};

// Trains until policy.steps, the target, a stop request or a stop signal, then saves the final
// checkpoint (when out_dir is set). Errors writing a checkpoint throw CheckpointError.
//
// A trainer of a group of processes (Trainer::distribute) runs fit on every process: they take
// every decision together (a stop request on any process stops all after the same step), and
// only rank 0 writes or deletes files; the observer of every process sees every event.
//
// A divergence ends the loop without saving and is reported in the result, not thrown. A run
// diverges when
// - a step's loss or gradient norm is not finite (that step is not applied);
// - a step's loss is both more than 4 times its running level and more than 1 above it (in
//   nats; the running level is an exponential average of the run's earlier losses, the newest
//   weighing 0.1, kept by the trainer and in its checkpoints, so that a resumed run judges as the
//   uninterrupted one; from a checkpoint written before it was kept, the level starts again at
//   the first step's loss), a blow-up no ordinary noise of training comes near (unless
//   policy.stop_on_loss_spike is false: a long full-batch run near zero loss spikes and recovers);
// - when a checkpoint is about to be written, the parameters are not finite, or their global
//   2-norm is more than 10 times what it was at the previous checkpoint of this call (or at its
//   start): exploded weights, which a loss computed before the update cannot show.
// So every checkpoint fit writes holds finite weights within tenfold of the last good ones,
// saved after a step whose loss passed the rules.
FitResult fit(Trainer& trainer, const LoopPolicy& policy, Observer& observer);

// The step checkpoint's name in dir: step-NNNNNN.h5.
std::string step_checkpoint_path(const std::string& dir, int64_t step);

}  // namespace gradlab::train
