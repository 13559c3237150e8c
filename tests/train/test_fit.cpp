// train::fit, the one training loop: which events its observer sees and when, the checkpoints it
// writes (best, periodic, final; pruned to --keep), and each way it stops (steps, target, a
// request, a divergence). One OpenMP thread, so every run is reproducible.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/cli_runner.h"
#include "tests/test_helpers.h"
#include "tests/train/small_run.h"
#include "train/fit.h"

namespace gradlab::train {
namespace test_fit {

namespace fs = std::filesystem;
using testing::contains;
using testing::TempDir;

using testing::small_run_config;

// Everything fit tells its observer, in order; stops when asked to after stop_after steps.
struct Recorder : Observer {
  std::vector<int64_t> steps, evaluations;
  std::vector<double> best_so_far;  // exact match at the evaluations that improved on it
  std::vector<std::string> checkpoints, events;
  std::vector<FitResult> stops;
  int64_t stop_after = -1;

  void on_step(int64_t step, const StepResult& r) override {
    EXPECT_TRUE(std::isfinite(r.loss));
    steps.push_back(step);
    events.push_back("step " + std::to_string(step));
  }
  void on_evaluation(int64_t step, const StepResult&, const Metrics& m) override {
    evaluations.push_back(step);
    if (best_so_far.empty() || m.exact_match > best_so_far.back()) {
      best_so_far.push_back(m.exact_match);
    }
    events.push_back("evaluation " + std::to_string(step));
  }
  void on_checkpoint(int64_t step, const std::string& path) override {
    checkpoints.push_back(fs::path(path).filename().string());
    events.push_back("checkpoint " + std::to_string(step));
  }
  void on_stop(const FitResult& result) override {
    stops.push_back(result);
    events.push_back("stop");
  }
  bool should_stop() override {
    return stop_after >= 0 && !steps.empty() && steps.back() >= stop_after;
  }
};

class FitTest : public ::testing::Test {
 protected:
  void SetUp() override { omp_set_num_threads(1); }
};

TEST_F(FitTest, EvaluatesEveryNStepsAndAtTheLastAndSavesTheFinalCheckpoint) {
  TempDir dir;
  Trainer trainer(small_run_config());
  LoopPolicy policy;
  policy.steps = 25;
  policy.eval_every = 10;
  policy.target_exact_match = 0;
  policy.out_dir = dir.file("run");
  Recorder seen;
  const FitResult result = fit(trainer, policy, seen);

  EXPECT_EQ(result.reason, StopReason::Steps);
  EXPECT_EQ(trainer.step(), 25);
  ASSERT_EQ(seen.steps.size(), 25u);
  for (size_t i = 0; i < seen.steps.size(); ++i) EXPECT_EQ(seen.steps[i], int64_t(i) + 1);
  EXPECT_EQ(seen.evaluations, (std::vector<int64_t>{10, 20, 25}));
  // A step's event comes before its evaluation; the stop comes last, once.
  EXPECT_LT(std::find(seen.events.begin(), seen.events.end(), "step 10"),
            std::find(seen.events.begin(), seen.events.end(), "evaluation 10"));
  EXPECT_EQ(seen.events.back(), "stop");
  ASSERT_EQ(seen.stops.size(), 1u);
  // best.h5 is written at each evaluation that improved the best exact match, then the final.
  std::vector<std::string> expected(seen.best_so_far.size(), "best.h5");
  expected.push_back("step-000025.h5");
  EXPECT_EQ(seen.checkpoints, expected);
  EXPECT_EQ(result.checkpoint, (fs::path(policy.out_dir) / "step-000025.h5").string());
  EXPECT_TRUE(fs::exists(result.checkpoint));
  EXPECT_EQ(read_checkpoint(result.checkpoint).train.step, 25);
}

TEST_F(FitTest, SavesEveryNStepsAndKeepsTheNewest) {
  TempDir dir;
  Trainer trainer(small_run_config());
  LoopPolicy policy;
  policy.steps = 30;
  policy.eval_every = 1000;
  policy.target_exact_match = 0;
  policy.out_dir = dir.file("run");
  policy.save_every = 5;
  policy.keep = 2;
  Recorder seen;
  fit(trainer, policy, seen);
  // The only evaluation, at the last step, writes best.h5; step 30 is both a periodic and the
  // final checkpoint: saved once.
  EXPECT_EQ(
      seen.checkpoints,
      (std::vector<std::string>{"step-000005.h5", "step-000010.h5", "step-000015.h5",
                                "step-000020.h5", "step-000025.h5", "best.h5", "step-000030.h5"}));
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(policy.out_dir)) {
    left.push_back(entry.path().filename().string());
  }
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"best.h5", "step-000025.h5", "step-000030.h5"}));
  // best.h5 and step 30 are written from one image of step 30; step 25 got an image of its own.
  const fs::path run = policy.out_dir;
  EXPECT_EQ(testing::read_text((run / "best.h5").string()),
            testing::read_text((run / "step-000030.h5").string()));
  EXPECT_EQ(read_checkpoint((run / "best.h5").string()).train.step, 30);
  EXPECT_EQ(read_checkpoint((run / "step-000025.h5").string()).train.step, 25);
}

// A language model's score is its negated loss, below the -1 a run starts from: its first
// evaluation must still write best.h5.
TEST_F(FitTest, TheFirstEvaluationWritesBestAlsoWhenRankedByLoss) {
  TempDir dir;
  Trainer trainer(small_run_config());
  LoopPolicy policy;
  policy.steps = 10;
  policy.eval_every = 5;
  policy.target_exact_match = 0;
  policy.best_by_loss = true;
  policy.out_dir = dir.file("run");
  Recorder seen;
  const FitResult result = fit(trainer, policy, seen);
  ASSERT_GT(result.last_metrics.loss, 1.0);  // a score below -1 at every evaluation
  ASSERT_FALSE(seen.checkpoints.empty());
  EXPECT_EQ(seen.checkpoints.front(), "best.h5");
  EXPECT_EQ(trainer.best_step(), 10);
  EXPECT_EQ(read_checkpoint((fs::path(policy.out_dir) / "best.h5").string()).train.step, 10);
  const auto saved_at_5 = std::find(seen.events.begin(), seen.events.end(), "checkpoint 5");
  ASSERT_NE(saved_at_5, seen.events.end());
  EXPECT_LT(std::find(seen.events.begin(), seen.events.end(), "evaluation 5"), saved_at_5);
}

TEST_F(FitTest, PrunesOnlyTheCheckpointsItWrote) {
  TempDir dir;
  const std::string out = dir.file("run");
  fs::create_directories(out);
  // Step checkpoints of an earlier run, older and newer by name than this run's.
  for (const char* name : {"step-000001.h5", "step-000100.h5"}) {
    std::ofstream(fs::path(out) / name) << "an earlier run's checkpoint";
  }
  Trainer trainer(small_run_config());
  LoopPolicy policy;
  policy.steps = 15;
  policy.eval_every = 1000;
  policy.target_exact_match = 0;
  policy.out_dir = out;
  policy.save_every = 5;
  policy.keep = 1;
  Recorder seen;
  fit(trainer, policy, seen);
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(out)) {
    left.push_back(entry.path().filename().string());
  }
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"best.h5", "step-000001.h5", "step-000015.h5",
                                            "step-000100.h5"}));
}

TEST_F(FitTest, WritesNoFileWithoutAnOutputDirectory) {
  Trainer trainer(small_run_config());
  LoopPolicy policy;
  policy.steps = 12;
  policy.eval_every = 5;
  policy.target_exact_match = 0;
  Recorder seen;
  const FitResult result = fit(trainer, policy, seen);
  EXPECT_TRUE(seen.checkpoints.empty());
  EXPECT_TRUE(result.checkpoint.empty());
  EXPECT_EQ(seen.evaluations, (std::vector<int64_t>{5, 10, 12}));
}

TEST_F(FitTest, StopsAtTheTarget) {
  RunConfig config;  // the default copy run: 99% exact match at its first evaluation, step 50
  finalize(config);
  Trainer trainer(config);
  LoopPolicy policy;
  policy.steps = 500;
  policy.eval_every = 50;
  Recorder seen;
  const FitResult result = fit(trainer, policy, seen);
  EXPECT_EQ(result.reason, StopReason::Target);
  EXPECT_EQ(trainer.step(), 50);
  EXPECT_GE(result.last_metrics.exact_match, 0.99);
}

TEST_F(FitTest, AStopRequestEndsTheLoopAndSaves) {
  TempDir dir;
  Trainer trainer(small_run_config());
  LoopPolicy policy;
  policy.steps = 100;
  policy.eval_every = 1000;
  policy.out_dir = dir.file("run");
  Recorder seen;
  seen.stop_after = 7;
  const FitResult result = fit(trainer, policy, seen);
  EXPECT_EQ(result.reason, StopReason::Requested);
  EXPECT_EQ(trainer.step(), 7);
  EXPECT_EQ(fs::path(result.checkpoint).filename(), "step-000007.h5");
  EXPECT_TRUE(fs::exists(result.checkpoint));
}

TEST_F(FitTest, ADivergenceStopsBeforeSavingTheDivergedState) {
  TempDir dir;
  RunConfig config = small_run_config();
  config.optimizer.name = "sgd";
  config.schedule.lr = 1e6;
  config.schedule.warmup_steps = 0;
  config.clip_norm = 0;
  finalize(config);
  Trainer trainer(config);
  LoopPolicy policy;
  policy.steps = 100;
  policy.eval_every = 1000;
  policy.out_dir = dir.file("run");
  policy.save_every = 1;
  policy.keep = 100;
  Recorder seen;
  const FitResult result = fit(trainer, policy, seen);
  ASSERT_EQ(result.reason, StopReason::Diverged);
  // The first update already blew the weights up: the save after it is refused.
  EXPECT_EQ(trainer.step(), 1);
  EXPECT_TRUE(contains(result.error, "norm grew")) << result.error;
  EXPECT_TRUE(contains(result.error, "by step 1")) << result.error;
  EXPECT_TRUE(result.checkpoint.empty());
  EXPECT_TRUE(result.last_checkpoint.empty());
  EXPECT_TRUE(seen.checkpoints.empty());
  EXPECT_FALSE(fs::exists(step_checkpoint_path(policy.out_dir, 1)));
  ASSERT_EQ(seen.stops.size(), 1u);
  EXPECT_EQ(seen.stops[0].reason, StopReason::Diverged);
}

}  // namespace test_fit
}  // namespace gradlab::train
