// Runs of the toy-transformer options (--d-ff 0, --norm none, --activation relu): they train,
// round-trip through a checkpoint, its /config and a config file, an old checkpoint without them
// loads with the defaults, --resume refuses to change them, and every bad value is a usage error
// naming the flag and what it takes.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "autograd/graph.h"
#include "tests/cli_runner.h"
#include "tests/test_helpers.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/fit.h"
#include "train/trainer.h"

namespace gradlab::train {
namespace test_toy_model_runs {

using testing::CommandResult;
using testing::contains;
using testing::expect_usage_error;
using testing::run_gradlab;
using testing::TempDir;

std::string fixture(const std::string& name) {
  return std::string(GRADLAB_TEST_FIXTURES_DIR) + "/" + name;
}

// A copy-task run of a 2-layer model with the given options: V 12, C 32, H 4, T 21.
RunConfig toy_run(int64_t d_ff, const std::string& norm, const std::string& activation) {
  RunConfig c;
  c.task.sequence.length = 4;
  c.net.d_model = 32;
  c.net.feed_forward.d_ff = d_ff;
  c.net.norm.kind = norm;
  c.net.feed_forward.activation = activation;
  c.batch_size = 16;
  c.eval_size = 64;
  c.threads = 1;
  finalize(c);
  return c;
}

// The entry of key in a checkpoint's /config, or a test failure.
ConfigValue entry(const std::vector<ConfigEntry>& entries, const std::string& key) {
  for (const auto& [name, value] : entries) {
    if (name == key) return value;
  }
  ADD_FAILURE() << "no /config/" << key;
  return ConfigValue();
}

TEST(ToyModelRuns, EachOptionRoundTripsThroughACheckpointBitForBit) {
  for (const RunConfig& config :
       {toy_run(0, nn::kNoNorm, nn::kGelu), toy_run(48, nn::kNoNorm, nn::kRelu),
        toy_run(0, nn::kLayerNorm, nn::kRelu)}) {
    SCOPED_TRACE("d_ff " + std::to_string(config.net.feed_forward.d_ff) + ", norm " +
                 config.net.norm.kind + ", activation " + config.net.feed_forward.activation);
    Trainer trainer(config);
    for (int i = 0; i < 2; ++i) trainer.train_step();
    TempDir dir;
    const std::string path = dir.file("toy.h5");
    save_checkpoint(path, trainer.checkpoint());
    const std::vector<ConfigEntry> saved = read_checkpoint(path).config;
    EXPECT_EQ(entry(saved, "d-ff"), ConfigValue(config.net.feed_forward.d_ff));
    EXPECT_EQ(entry(saved, "norm"), ConfigValue(config.net.norm.kind));
    EXPECT_EQ(entry(saved, "activation"), ConfigValue(config.net.feed_forward.activation));

    const LoadedRun loaded = load_run(path);
    EXPECT_EQ(loaded.config.net.feed_forward.d_ff, config.net.feed_forward.d_ff);
    EXPECT_EQ(loaded.config.net.norm.kind, config.net.norm.kind);
    EXPECT_EQ(loaded.config.net.feed_forward.activation, config.net.feed_forward.activation);
    NoGradGuard no_grad;
    const nn::SequenceBatch& batch = trainer.heldout();
    EXPECT_EQ(loaded.trainer->model().forward(batch).to_vector(),
              trainer.model().forward(batch).to_vector());
    const std::string file = to_config_file(config);
    EXPECT_TRUE(contains(file, "\nnorm = " + config.net.norm.kind + "\n")) << file;
    EXPECT_TRUE(contains(file, "\nactivation = " + config.net.feed_forward.activation + "\n"))
        << file;
  }
}

TEST(ToyModelRuns, ACheckpointFromBeforeTheOptionsLoadsWithTheDefaults) {
  const LoadedRun run = load_run(fixture("pre-registry-copy.h5"));
  EXPECT_EQ(run.config.net.norm.kind, nn::kLayerNorm);
  EXPECT_EQ(run.config.net.feed_forward.activation, nn::kGelu);
  EXPECT_EQ(run.config.net.feed_forward.d_ff, 32);
}

// Olsson et al.'s setting: 2 attention-only layers, no LayerNorm, learn to copy.
TEST(ToyModelRuns, AnAttentionOnlyModelWithoutNormLearnsTheCopyTask) {
  RunConfig config = toy_run(0, nn::kNoNorm, nn::kGelu);
  config.net.num_layers = 2;
  Trainer trainer(config);
  const double start = trainer.evaluate().loss;
  LoopPolicy policy;
  policy.steps = 300;
  policy.eval_every = 300;
  policy.target_exact_match = 0;
  Observer quiet;
  const Metrics end = fit(trainer, policy, quiet).last_metrics;
  EXPECT_LT(end.loss, 0.25 * start) << "from " << start;
}

TEST(ToyModelRuns, TheCommandLineTrainsInspectsAndKeepsTheOptionsOnResume) {
  TempDir dir;
  // testing::kTiny's run, attention-only, without norm, with a ReLU (for the config file).
  std::vector<std::string> args{"train", "--out",        dir.file("run"), "--norm",
                                "none",  "--activation", "relu"};
  args.insert(args.end(), testing::kTiny.begin(), testing::kTiny.end());
  *std::next(std::find(args.begin(), args.end(), "--d-ff")) = "0";
  const CommandResult trained = run_gradlab(args);
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  const std::string config_file = testing::read_text(dir.path() / "run" / "config.ini");
  EXPECT_TRUE(contains(config_file, "d-ff = 0\n")) << config_file;
  EXPECT_TRUE(contains(config_file, "norm = none\n")) << config_file;

  const CommandResult inspected =
      run_gradlab({"inspect", "--checkpoint", dir.file("run/step-000002.h5")});
  ASSERT_EQ(inspected.exit_code, 0) << inspected.describe();
  EXPECT_TRUE(contains(inspected.out, "norm")) << inspected.out;
  EXPECT_TRUE(contains(inspected.out, "none")) << inspected.out;
  EXPECT_TRUE(contains(inspected.out, "relu")) << inspected.out;
  EXPECT_FALSE(contains(inspected.out, "ln1")) << inspected.out;
  EXPECT_FALSE(contains(inspected.out, "ffn")) << inspected.out;

  for (const auto& [flag, value] : {std::pair{"--norm", "layer"}, std::pair{"--activation", "gelu"},
                                    std::pair{"--d-ff", "8"}}) {
    const CommandResult resumed =
        run_gradlab({"train", "--resume", dir.file("run"), "--steps", "4", flag, value});
    expect_usage_error(resumed, "train", {flag, "cannot change on --resume"});
  }
}

TEST(ToyModelRuns, BadValuesAreUsageErrorsNamingTheFlagAndItsValues) {
  expect_usage_error(run_gradlab({"train", "--norm", "batch"}), "train",
                     {"--norm", "'batch'", "layer, none or rmsnorm"});
  expect_usage_error(run_gradlab({"train", "--activation", "tanh"}), "train",
                     {"--activation", "'tanh'", "gelu or relu"});
  expect_usage_error(run_gradlab({"train", "--d-ff", "-1"}), "train",
                     {"--d-ff", "-1", "0 for attention-only blocks"});
}

}  // namespace test_toy_model_runs
}  // namespace gradlab::train
