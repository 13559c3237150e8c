// A diverging run is stopped before anything from its bad state is saved (fit.h's rules): a
// learning rate that explodes the weights, a loss that jumps far above its running level; the
// checkpoint called "last good" is good; and a checkpoint with non-finite weights is refused by
// every command that loads it.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "tests/cli_runner.h"
#include "tests/test_helpers.h"
#include "train/fit.h"

namespace gradlab::train {
namespace test_divergence {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::contains;
using testing::run_gradlab;
using testing::TempDir;

RunConfig small_config(double lr) {
  RunConfig c;
  c.task.sequence.length = 4;
  c.net.d_model = 32;
  c.net.feed_forward.d_ff = 64;
  c.batch_size = 16;
  c.eval_size = 64;
  c.schedule.lr = lr;
  c.schedule.warmup_steps = 0;
  finalize(c);
  return c;
}

double weight_norm(const std::vector<nn::NamedTensor>& params) {
  std::vector<Tensor> tensors;
  for (const auto& [_, p] : params) tensors.push_back(p);
  return global_norm(tensors);
}

// Every checkpoint left in dir reads back with finite weights within tenfold of `initial`.
void expect_only_good_checkpoints(const std::string& dir, double initial) {
  if (!fs::exists(dir)) return;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".h5") continue;
    const CheckpointData data = read_checkpoint(entry.path().string());
    const double norm = weight_norm(data.model);
    EXPECT_TRUE(std::isfinite(norm)) << entry.path();
    EXPECT_LE(norm, 10 * initial) << entry.path() << " holds exploded weights";
  }
}

TEST(Divergence, ExplodingWeightsAreNeverSaved) {
  omp_set_num_threads(1);
  TempDir tmp;
  Trainer trainer(small_config(1e6));
  const double initial = weight_norm(trainer.model().named_parameters());
  LoopPolicy policy;
  policy.steps = 200;
  policy.eval_every = 5;
  policy.save_every = 5;
  policy.target_exact_match = 0;
  policy.out_dir = tmp.file("run");
  Observer quiet;
  const FitResult result = fit(trainer, policy, quiet);
  EXPECT_EQ(result.reason, StopReason::Diverged);
  EXPECT_TRUE(result.checkpoint.empty());
  EXPECT_LT(trainer.step(), 10) << "stopped at the first save, or before";
  EXPECT_TRUE(contains(result.error, "norm grew") || contains(result.error, "running level") ||
              contains(result.error, "not finite"))
      << result.error;
  expect_only_good_checkpoints(policy.out_dir, initial);
}

// The copy task's data until step `switch_at`, then the same inputs with every target replaced
// by another token: the loss jumps by several nats with weights that are perfectly sane.
class SwitchedTargets : public DataSource {
 public:
  SwitchedTargets(std::shared_ptr<const DataSource> data, int64_t switch_at, int64_t vocab)
      : data_(std::move(data)), switch_at_(switch_at), vocab_(vocab) {}
  nn::SequenceBatch training_batch(int64_t step) const override {
    nn::SequenceBatch batch = data_->training_batch(step);
    if (step >= switch_at_) {
      for (int64_t& t : batch.targets.values) {
        if (t >= 0) t = (t + 1) % vocab_;
      }
    }
    return batch;
  }
  nn::SequenceBatch heldout() const override { return data_->heldout(); }

 private:
  std::shared_ptr<const DataSource> data_;
  int64_t switch_at_, vocab_;
};

// A copy-task trainer whose targets change at step 150: its loss jumps there.
std::unique_ptr<Trainer> spiking_trainer() {
  const RunConfig config = small_config(3e-3);
  auto model = nn::make_sequence_model(config.model, config.net);
  auto data = std::make_shared<SwitchedTargets>(
      std::make_shared<TaskData>(config.task, model, config.seed, config.batch_size,
                                 config.eval_size),
      150, config.net.vocab_size);
  TrainerOptions options;
  options.schedule = config.schedule;
  return std::make_unique<Trainer>(
      model, make_optimizer(config.optimizer, model->named_parameters()), data, options);
}

TEST(Divergence, ALossFarAboveItsRunningLevelStopsTheRunBeforeItsNextSave) {
  omp_set_num_threads(1);
  TempDir tmp;
  const std::unique_ptr<Trainer> spiking = spiking_trainer();
  Trainer& trainer = *spiking;
  LoopPolicy policy;
  policy.steps = 300;
  policy.eval_every = 1000;
  policy.save_every = 50;
  policy.target_exact_match = 0;
  policy.out_dir = tmp.file("run");
  Observer quiet;
  const FitResult result = fit(trainer, policy, quiet);
  EXPECT_EQ(result.reason, StopReason::Diverged);
  EXPECT_EQ(trainer.step(), 150) << "the step whose loss jumped";
  EXPECT_TRUE(contains(result.error, "at step 150 is far above its running level")) << result.error;
  EXPECT_EQ(fs::path(result.last_checkpoint).filename(), "step-000100.h5");
  // The good checkpoint records the finite loss of the step it was saved after.
  const double saved_loss = read_checkpoint(result.last_checkpoint).train.loss;
  EXPECT_TRUE(std::isfinite(saved_loss));
  EXPECT_LT(saved_loss, 1.0);
  EXPECT_FALSE(fs::exists(tmp.file("run/step-000150.h5")));
}

// The running level of the loss travels in the checkpoint: a run resumed one step before the
// spike stops at it with the same words (the same level) as the uninterrupted run.
TEST(Divergence, AResumedRunJudgesASpikeAsTheUninterruptedRun) {
  omp_set_num_threads(1);
  TempDir tmp;
  LoopPolicy policy;
  policy.steps = 300;
  policy.eval_every = 1000;
  policy.target_exact_match = 0;
  Observer quiet;
  const std::unique_ptr<Trainer> straight = spiking_trainer();
  const FitResult uninterrupted = fit(*straight, policy, quiet);
  ASSERT_EQ(uninterrupted.reason, StopReason::Diverged);
  ASSERT_EQ(straight->step(), 150);

  const std::unique_ptr<Trainer> first = spiking_trainer();
  LoopPolicy until_spike = policy;
  until_spike.steps = 149;
  until_spike.out_dir = tmp.file("run");
  const FitResult saved = fit(*first, until_spike, quiet);
  ASSERT_EQ(saved.reason, StopReason::Steps) << saved.error;
  EXPECT_TRUE(std::isfinite(read_checkpoint(saved.checkpoint).train.loss_level));

  const std::unique_ptr<Trainer> resumed = spiking_trainer();
  resumed->restore(saved.checkpoint);
  const FitResult after = fit(*resumed, policy, quiet);
  EXPECT_EQ(after.reason, StopReason::Diverged);
  EXPECT_EQ(resumed->step(), 150);
  EXPECT_EQ(after.error, uninterrupted.error);
}

TEST(Divergence, ALossSpikePassesWhenTheRunAsksForIt) {
  omp_set_num_threads(1);
  TempDir tmp;
  const std::unique_ptr<Trainer> spiking = spiking_trainer();
  Trainer& trainer = *spiking;
  LoopPolicy policy;
  policy.steps = 200;
  policy.eval_every = 1000;
  policy.target_exact_match = 0;
  policy.stop_on_loss_spike = false;
  Observer quiet;
  const FitResult result = fit(trainer, policy, quiet);
  EXPECT_EQ(result.reason, StopReason::Steps) << result.error;
  EXPECT_EQ(trainer.step(), 200) << "the spike at step 150 did not stop the run";
}

TEST(Divergence, ACheckpointWithNonFiniteWeightsIsRefusedByEveryLoader) {
  TempDir tmp;
  Trainer trainer(small_config(3e-3));
  CheckpointData data = trainer.checkpoint();
  const std::string name = data.model[3].first;
  Tensor broken = data.model[3].second.clone();
  broken.mutable_data<float>()[1] = std::numeric_limits<float>::quiet_NaN();
  data.model[3].second = broken;
  const std::string path = tmp.file("nan.h5");
  save_checkpoint(path, data);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"eval", "--checkpoint", path},
        {"predict", "--checkpoint", path, "--input", "1 2 3 4"},
        {"train", "--resume", path, "--steps", "10", "--out", tmp.file("resumed")}}) {
    const CommandResult r = run_gradlab(args);
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_TRUE(contains(r.err, path + ": /model/" + name + ": holds non-finite values")) << r.err;
  }
  EXPECT_THROW(load_model(path), CheckpointError);
}

}  // namespace test_divergence
}  // namespace gradlab::train
