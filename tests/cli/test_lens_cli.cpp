// `gradlab lens` on decoder and encoder-decoder checkpoints of a toy task and a language
// model's: the last layer's p(answer) is the softmax of the logits `gradlab activations` writes,
// what it prints, and the refusals of its flags and outputs.
#include <H5Cpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>

#include "tests/cli_runner.h"
#include "tests/h5_reading.h"
#include "tests/test_helpers.h"

namespace gradlab::testing {
namespace test_lens_cli {

namespace fs = std::filesystem;

class LensCliTest : public ::testing::Test {
 protected:
  static std::string checkpoint(const std::string& model) {
    return model == "text" ? tiny_text_model() : toy_checkpoint(kTiny, model);
  }
  // The prompt flag and its value for the model.
  static std::vector<std::string> prompt_of(const std::string& model) {
    return model == "text" ? std::vector<std::string>{"--prompt", "the cat"}
                           : std::vector<std::string>{"--input", "2 1"};
  }
};

TEST_F(LensCliTest, TheLastLayerIsTheSoftmaxOfTheModelsLogits) {
  TempDir tmp;
  for (const std::string model : {"decoder", "seq2seq", "text"}) {
    SCOPED_TRACE(model);
    const std::string lens = tmp.file(model + "-lens.h5");
    const std::string logits = tmp.file(model + "-logits.h5");
    CommandResult r =
        run_gradlab(with({"lens", "--checkpoint", checkpoint(model), "--top", "2", "--out", lens},
                         prompt_of(model)));
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    r = run_gradlab(with({"activations", "--checkpoint", checkpoint(model), "--names",
                          "hook_logits", "--out", logits},
                         prompt_of(model)));
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    H5::Exception::dontPrint();
    const H5::H5File ours(lens, H5F_ACC_RDONLY), theirs(logits, H5F_ACC_RDONLY);
    std::vector<hsize_t> dims, logit_dims, token_dims;
    EXPECT_EQ(read_values<int64_t>(ours, "inputs", dims),
              read_values<int64_t>(theirs, "inputs", token_dims));
    const std::vector<int64_t> targets = read_values<int64_t>(ours, "targets", dims);
    const std::vector<float> p = read_floats(ours, "answer_probability", dims);
    const std::vector<float> l = read_floats(theirs, "hook_logits", logit_dims);  // [T, V]
    const hsize_t layers = model == "text" ? 3 : 2, positions = logit_dims[0],
                  vocab = logit_dims[1];
    ASSERT_EQ(dims, (std::vector<hsize_t>{layers, positions}));
    ASSERT_EQ(targets.size(), positions);
    const std::vector<int64_t> top = read_values<int64_t>(ours, "top_tokens", token_dims);
    EXPECT_EQ(token_dims, (std::vector<hsize_t>{layers, positions, 2}));
    int counted = 0;
    for (hsize_t t = 0; t < positions; ++t) {
      const float* row = l.data() + t * vocab;
      const float largest = *std::max_element(row, row + vocab);
      double sum = 0;
      for (hsize_t v = 0; v < vocab; ++v) sum += std::exp(double(row[v]) - largest);
      const float last_layer = p[(layers - 1) * positions + t];
      EXPECT_EQ(top[((layers - 1) * positions + t) * 2], std::max_element(row, row + vocab) - row)
          << t;
      if (targets[t] == -100) {
        EXPECT_TRUE(std::isnan(last_layer)) << t;
        continue;
      }
      ++counted;
      EXPECT_NEAR(last_layer, std::exp(double(row[targets[t]]) - largest) / sum, 1e-6) << t;
    }
    EXPECT_EQ(counted, model == "text" ? 7 : 2);  // every character; the answer of 2 tokens
  }
}

TEST_F(LensCliTest, PrintsEachAnsweredPositionsLayers) {
  CommandResult r =
      run_gradlab(with({"lens", "--checkpoint", checkpoint("decoder")}, prompt_of("decoder")));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  // The decoder reads "2 1", the separator (0) and the answer's first token: positions 2 and 3
  // predict the answer, 0 and 1 nothing.
  EXPECT_TRUE(contains(r.out, "position 2 reads 0, answer ")) << r.out;
  EXPECT_TRUE(contains(r.out, "position 3 reads ")) << r.out;
  EXPECT_FALSE(contains(r.out, "position 1 reads ")) << r.out;
  EXPECT_TRUE(contains(r.out, "  embed     p(answer) ")) << r.out;
  EXPECT_TRUE(contains(r.out, "  blocks.0  p(answer) ")) << r.out;
  r = run_gradlab(with({"lens", "--checkpoint", checkpoint("text")}, prompt_of("text")));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "position 3 reads ' ', answer 'c'")) << r.out;
}

TEST_F(LensCliTest, BadFlagsAndOutputsAreUsageErrors) {
  TempDir tmp;
  const auto lens = [&](const std::string& model, std::vector<std::string> args) {
    return run_gradlab(
        with(with({"lens", "--checkpoint", checkpoint(model)}, prompt_of(model)), args));
  };
  expect_usage_error(lens("decoder", {"--top", "0"}), "lens", "--top must be at least 1");
  // V = 5: 3 symbols, the separator and padding.
  expect_usage_error(lens("decoder", {"--top", "6"}), "lens", {"--top 6", "5 tokens"});
  expect_usage_error(lens("decoder", {"--out", checkpoint("seq2seq")}), "lens",
                     {"is a checkpoint", "the logit lens"});
  const std::string out = tmp.file("lens.h5");
  ASSERT_EQ(lens("decoder", {"--out", out}).exit_code, 0);
  expect_usage_error(lens("decoder", {"--out", out}), "lens", "--overwrite");
  EXPECT_EQ(lens("decoder", {"--out", out, "--overwrite"}).exit_code, 0);
  expect_usage_error(run_gradlab({"lens", "--checkpoint", checkpoint("text"), "--input", "1 2"}),
                     "lens", {"language model", "--prompt"});
  expect_usage_error(run_gradlab({"lens", "--checkpoint", checkpoint("decoder")}), "lens",
                     "exactly one of --input");
}

}  // namespace test_lens_cli
}  // namespace gradlab::testing
