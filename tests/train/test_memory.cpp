// The memory estimate behind --max-memory: the parameter count it uses is the models' own, and a
// configuration above the limit is refused before anything is allocated, naming the flags.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/cli_runner.h"
#include "tests/test_helpers.h"
#include "train/memory.h"

namespace gradlab::train {
namespace test_memory {

using testing::CommandResult;
using testing::contains;
using testing::run_gradlab;

TEST(Memory, TheParameterCountIsTheModelsOwn) {
  struct Case {
    const char* name;
    std::string model;
    int64_t kv_heads;
    bool bias, tie, learned;
    int64_t d_ff = 40;
    std::string norm = nn::kLayerNorm;
  };
  for (const Case& c : std::vector<Case>{
           {"decoder", "decoder", 0, true, false, true},
           {"decoder GQA, sinusoidal", "decoder", 2, true, false, false},
           {"decoder, no bias, tied", "decoder", 1, false, true, true},
           {"seq2seq", "seq2seq", 0, true, false, true},
           {"seq2seq GQA, no bias", "seq2seq", 2, false, false, false},
           {"decoder, attention-only", "decoder", 0, true, false, true, 0},
           {"decoder, no norm", "decoder", 0, true, false, true, 40, nn::kNoNorm},
           {"decoder, attention-only, no norm, no bias", "decoder", 0, false, false, true, 0,
            nn::kNoNorm},
           {"seq2seq, attention-only", "seq2seq", 0, true, false, true, 0},
           {"seq2seq, no norm, no bias", "seq2seq", 0, false, false, true, 40, nn::kNoNorm},
           {"seq2seq, attention-only, no norm", "seq2seq", 0, true, true, true, 0, nn::kNoNorm}}) {
    SCOPED_TRACE(c.name);
    RunConfig config;
    config.model = c.model;
    config.task.sequence.length = 5;  // unequal sizes everywhere: V 12, C 24, H 4, F 40 (or 0), L 3
    config.net.d_model = 24;
    config.net.attention.num_kv_heads = c.kv_heads;
    config.net.feed_forward.d_ff = c.d_ff;
    config.net.norm.kind = c.norm;
    config.net.num_layers = 3;
    config.net.bias = c.bias;
    config.net.embedding.tie_embeddings = c.tie;
    config.net.embedding.learned_positions = c.learned;
    finalize(config);
    const auto model = nn::make_sequence_model(config.model, config.net);
    EXPECT_EQ(nn::model_footprint(config.model, config.net).parameters,
              static_cast<double>(model->num_parameters()));
  }
}

TEST(Memory, AConfigurationAboveTheLimitIsRefusedNamingItsFlags) {
  const struct {
    std::vector<std::string> flags;
    std::string named;
  } cases[] = {
      {{"--batch-size", "20000"}, "for --batch-size 20000 sequences of 21 positions (--length)"},
      {{"--eval-size", "10000000"}, "the held-out set"},
      {{"--d-model", "2048", "--d-ff", "16384", "--layers", "64"}, "parameters and optimizer"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args{"train", "--max-memory", "2", "--out", "unused"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    const CommandResult r = run_gradlab(args);
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_TRUE(contains(r.err, c.named)) << r.err;
    EXPECT_TRUE(contains(r.err, "above the limit of 2 GiB (--max-memory)")) << r.err;
    // Not an upper bound, and the message says so.
    EXPECT_TRUE(contains(r.err, "(an estimate: measured peaks were ")) << r.err;
  }
  const CommandResult bad = run_gradlab({"train", "--max-memory", "-1"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(contains(bad.err, "--max-memory must be")) << bad.err;
}

TEST(Memory, ExplainEstimatesItsWalkBeforeRunningIt) {
  const CommandResult big =
      run_gradlab({"explain", "--shapes", "8,1024,1024,8", "--max-memory", "0.5"});
  EXPECT_EQ(big.exit_code, 2) << big.describe();
  EXPECT_TRUE(contains(big.err, "the walk needs about 1.3 GiB, above the limit of 0.5 GiB"))
      << big.err;
  const CommandResult small = run_gradlab({"explain", "--shapes", "2,3,4,2", "--max-memory", "1"});
  EXPECT_EQ(small.exit_code, 0) << small.describe();
}

TEST(Memory, TheDefaultLimitIsMostOfTheMachinesMemory) {
  RunConfig config;
  finalize(config);
  EXPECT_GT(memory_limit(config), 0.5 * 1024 * 1024 * 1024);
  config.max_memory = 3;
  EXPECT_EQ(memory_limit(config), 3.0 * 1024 * 1024 * 1024);
  EXPECT_LT(estimate_memory(config).total(), 0.1 * 1024 * 1024 * 1024) << "the default run";
}

}  // namespace test_memory
}  // namespace gradlab::train
