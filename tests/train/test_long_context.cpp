// Long contexts: the 2^28-element limit on [B, H, T, T] attention scores applies only where they
// are kept (the composed path, which dropout takes, and the per-head kernel of short sequences),
// not to the tiled kernel long sequences take, whose memory is linear in T; the memory estimate
// counts it so.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "tests/cli_runner.h"
#include "tests/test_helpers.h"
#include "train/memory.h"

namespace gradlab::train {
namespace test_long_context {

using testing::CommandResult;
using testing::contains;
using testing::run_gradlab;
using testing::TempDir;

// The default task with 8193 positions (prompt, separator, answer): [1, 8, 8193, 8193] scores
// are 2^29 elements, above the limit.
RunConfig long_run(int64_t length, double dropout) {
  RunConfig c;
  c.task.sequence.length = length;
  c.net.d_model = 16;
  c.net.attention.num_heads = 8;
  c.net.num_layers = 1;
  c.net.dropout = dropout;
  c.batch_size = 1;
  return c;
}

TEST(LongContext, ScoresOnlyTheTiledKernelSeesAreNotLimited) {
  RunConfig c = long_run(4096, 0);
  ASSERT_NO_THROW(finalize(c));
  EXPECT_EQ(c.net.max_len, 8193);
  // The per-head kernel runs below 256 keys (causal) only.
  EXPECT_EQ(nn::model_footprint(c.model, c.net).longest_keys_with_weights, 255);
}

TEST(LongContext, ScoresKeptAboveTheLimitAreRefusedNamingTheShapeAndFlags) {
  RunConfig c = long_run(4096, 0.1);  // dropout: the composed path, which keeps every score
  try {
    finalize(c);
    FAIL() << "finalize accepted [1, 8, 8193, 8193] attention scores under dropout";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    for (const char* part :
         {"--batch-size 1", "--heads 8", "--length 4096", "--dropout 0.1",
          "[B, H, T, T] attention scores [1, 8, 8193, 8193]", "above 2^28 elements"}) {
      EXPECT_TRUE(contains(message, part)) << part << " not in: " << message;
    }
  }
}

// Twice the context, about twice the activations: the tiled kernel keeps one log-sum-exp per
// query row and head, where kept weights would make it four times.
TEST(LongContext, TheMemoryEstimateIsLinearInTheContext) {
  RunConfig shorter = long_run(4096, 0), longer = long_run(8192, 0);
  // A limit no estimate reaches: this test compares the estimates, finalize does not refuse them.
  shorter.max_memory = longer.max_memory = 1e6;
  finalize(shorter);
  finalize(longer);
  const double ratio = estimate_memory(longer).activations / estimate_memory(shorter).activations;
  EXPECT_GT(ratio, 1.9);
  EXPECT_LT(ratio, 2.1);
}

// One training step at a context of 8192 with 8 heads ([1, 8, 8192, 8192] scores, 2^29
// elements) runs through the tiled kernel. Keeping that checkpoint's attention weights over a
// prompt as long is refused, naming the shape and the flags; over a shorter one it is not.
TEST(LongContext, TrainsAboveTheScoreLimitAndRefusesToKeepTheWeights) {
  TempDir tmp;
  std::string text;
  while (text.size() < 100000) text += "the cat sat on the mat and was warm. ";
  const std::string data = tmp.file("text.txt");
  std::ofstream(data) << text;
  const std::string run = tmp.file("run");
  const CommandResult trained = run_gradlab(
      {"train", "--task",  "text", "--data",       data, "--context", "8192", "--d-model",
       "16",    "--heads", "8",    "--layers",     "1",  "--d-ff",    "16",   "--batch-size",
       "1",     "--steps", "1",    "--eval-iters", "1",  "--out",     run});
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  const std::string checkpoint = run + "/step-000001.h5";
  for (const std::string command : {"activations", "attention"}) {
    SCOPED_TRACE(command);
    const CommandResult r = run_gradlab({command, "--checkpoint", checkpoint, "--prompt",
                                         text.substr(0, 8192), "--out", tmp.file(command + ".h5")});
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_TRUE(contains(r.err,
                         "--prompt (8192 positions) and the checkpoint's --heads 8 describe "
                         "[B, H, T, T] attention weights [1, 8, 8192, 8192], above 2^28 elements"))
        << r.err;
  }
  const CommandResult shorter = run_gradlab({"attention", "--checkpoint", checkpoint, "--prompt",
                                             text.substr(0, 64), "--out", tmp.file("short.h5")});
  EXPECT_EQ(shorter.exit_code, 0) << shorter.describe();
}

}  // namespace test_long_context
}  // namespace gradlab::train
