// Checkpoints and a config file written by an earlier gradlab (every task's /config held the
// text options; the exact-match target was `target-accuracy`) still load, evaluate, predict and
// sample as they did then: the figures below are what that gradlab printed for them.
#include <gtest/gtest.h>

#include <string>

#include "tests/cli_runner.h"
#include "tests/test_helpers.h"
#include "train/config.h"
#include "train/trainer.h"

namespace gradlab::train {
namespace pre_registry_checkpoints {

using testing::contains;
using testing::run_gradlab;

std::string fixture(const std::string& name) {
  return std::string(GRADLAB_TEST_FIXTURES_DIR) + "/" + name;
}

// The saved /config entries of a config, and of the config they read back as.
void expect_round_trip(const RunConfig& config) {
  const std::vector<ConfigEntry> entries = to_entries(config);
  EXPECT_EQ(to_entries(from_entries(entries, "round trip")), entries);
}

TEST(PreRegistryCheckpoints, CopyRunLoadsWithItsMetrics) {
  const LoadedRun run = load_run(fixture("pre-registry-copy.h5"));
  EXPECT_EQ(run.trainer->step(), 20);
  EXPECT_EQ(run.config.net.d_model, 16);
  EXPECT_EQ(run.config.batch_size, 8);
  EXPECT_EQ(run.config.eval_size, 16);
  EXPECT_EQ(run.config.seed, 3u);
  EXPECT_EQ(run.config.target_exact_match, 0.95);
  const Metrics m = run.trainer->evaluate();
  EXPECT_NEAR(m.loss, 2.044278, 5e-7);
  EXPECT_NEAR(m.token_accuracy, 0.234375, 1e-12);  // 15 of 64 positions
  EXPECT_EQ(m.exact_match, 0);
  expect_round_trip(run.config);
}

TEST(PreRegistryCheckpoints, TextRunLoadsWithItsMetrics) {
  const LoadedRun run = load_run(fixture("pre-registry-text.h5"), fixture("pre-registry-text.txt"));
  EXPECT_EQ(run.trainer->step(), 10);
  EXPECT_EQ(run.config.net.d_model, 16);
  EXPECT_EQ(run.config.seed, 5u);
  EXPECT_NEAR(run.trainer->evaluate().loss, 3.675259, 5e-7);
  expect_round_trip(run.config);
  const LoadedModel model = load_model(fixture("pre-registry-text.h5"));
  EXPECT_EQ(to_entries(model.config), to_entries(run.config));
}

TEST(PreRegistryCheckpoints, CommandsPrintWhatTheyPrintedThen) {
  const auto eval = run_gradlab({"eval", "--checkpoint", fixture("pre-registry-copy.h5")});
  ASSERT_EQ(eval.exit_code, 0) << eval.describe();
  EXPECT_TRUE(contains(eval.out, "loss 2.044278\ntoken accuracy 0.2344\nexact match 0.0000\n"))
      << eval.out;

  const auto text_eval = run_gradlab({"eval", "--checkpoint", fixture("pre-registry-text.h5"),
                                      "--data", fixture("pre-registry-text.txt")});
  ASSERT_EQ(text_eval.exit_code, 0) << text_eval.describe();
  EXPECT_TRUE(
      contains(text_eval.out, "loss 3.675259\nbits per character 5.3023\ntoken accuracy 0.0347\n"))
      << text_eval.out;

  const auto predict = run_gradlab(
      {"predict", "--checkpoint", fixture("pre-registry-copy.h5"), "--input", "1 2 3 4"});
  ASSERT_EQ(predict.exit_code, 0) << predict.describe();
  EXPECT_TRUE(contains(predict.out, "output   6 6 4 4\n")) << predict.out;

  const auto sample = run_gradlab({"sample", "--checkpoint", fixture("pre-registry-text.h5"),
                                   "--prompt", "the ", "--tokens", "12", "--temperature", "0"});
  ASSERT_EQ(sample.exit_code, 0) << sample.describe();
  EXPECT_EQ(sample.out, "the pp,pe,teep,e\n");

  const auto inspect = run_gradlab({"inspect", "--checkpoint", fixture("pre-registry-copy.h5")});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.describe();
  EXPECT_TRUE(contains(inspect.out, "  task               copy\n")) << inspect.out;
  EXPECT_TRUE(contains(inspect.out, "  symbols            6\n")) << inspect.out;
}

// The copy run's config.ini, reused with --config, trains the run it describes.
TEST(PreRegistryCheckpoints, OldConfigFileStillTrains) {
  testing::TempDir dir;
  const std::string out = dir.file("run");
  const auto train = run_gradlab({"train", "--config", fixture("pre-registry-copy.ini"), "--steps",
                                  "2", "--eval-every", "1", "--out", out});
  ASSERT_EQ(train.exit_code, 0) << train.describe();
  const LoadedRun run = load_run(out + "/step-000002.h5");
  EXPECT_EQ(run.config.task.sequence.length, 4);
  EXPECT_EQ(run.config.task.sequence.num_symbols, 6);
  EXPECT_EQ(run.config.net.d_model, 16);
  EXPECT_EQ(run.config.target_exact_match, 0.95);
}

}  // namespace pre_registry_checkpoints
}  // namespace gradlab::train
