// `gradlab hooks` and `gradlab activations` on decoder and encoder-decoder checkpoints and a
// language model's: the points listed, the HDF5 file (the same attention weights `gradlab
// attention` writes, gradients of the shapes of their activations, a text prompt's tokens) and
// the errors.
#include <H5Cpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <set>

#include "tests/cli_runner.h"
#include "tests/h5_reading.h"
#include "tests/test_helpers.h"

namespace gradlab::testing {
namespace test_hooks_cli {

namespace fs = std::filesystem;

// Copy task of length 3 with symbols 1..3: prompts "3 1 2".
const std::vector<std::string> kModel = {"--length",
                                         "3",
                                         "--symbols",
                                         "3",
                                         "--d-model",
                                         "16",
                                         "--heads",
                                         "4",
                                         "--kv-heads",
                                         "2",
                                         "--d-ff",
                                         "16",
                                         "--batch-size",
                                         "8",
                                         "--eval-size",
                                         "8",
                                         "--steps",
                                         "20",
                                         "--target-exact-match",
                                         "0"};

class HooksCliTest : public ::testing::Test {
 protected:
  static std::string checkpoint(const std::string& model) {
    return model == "text" ? tiny_text_model() : toy_checkpoint(kModel, model);
  }
};

// The char tokenizer's ids of ASCII text: each character's rank among kTinyText's distinct ones.
std::vector<int64_t> tiny_text_tokens(const std::string& text) {
  const std::set<char> vocabulary(kTinyText.begin(), kTinyText.end());
  std::vector<int64_t> tokens;
  for (char c : text) tokens.push_back(std::distance(vocabulary.begin(), vocabulary.find(c)));
  return tokens;
}

std::string letters_of(const H5::H5File& file, const std::string& name) {
  const H5::Attribute attribute = file.openDataSet(name).openAttribute("letters");
  std::string letters;
  attribute.read(attribute.getStrType(), letters);
  return letters;
}

TEST_F(HooksCliTest, HooksListsThePointsWithTheirShapes) {
  CommandResult r = run_gradlab({"hooks", "--checkpoint", checkpoint("decoder")});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "46 hook points")) << r.out;
  // H = 4, KV = 2, D = 4, F = 16, V = 5 (3 symbols, the separator and padding).
  EXPECT_TRUE(contains(r.out, "blocks.1.attn.hook_k          [B, Tk, KV, D]   [B, Tk, 2, 4]"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "blocks.0.ffn.hook_post        [B, T, F]        [B, T, 16]"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "hook_logits")) << r.out;
  r = run_gradlab({"hooks", "--checkpoint", checkpoint("seq2seq")});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (const char* name : {"embed.hook_source_token", "encoder.1.attn.hook_pattern",
                           "decoder.0.cross_attn.hook_k", "decoder.1.hook_resid_mid_cross"}) {
    EXPECT_TRUE(contains(r.out, name)) << name << "\n" << r.out;
  }
}

TEST_F(HooksCliTest, ActivationsHoldTheWeightsTheAttentionCommandWrites) {
  TempDir tmp;
  for (const std::string model : {"decoder", "seq2seq"}) {
    SCOPED_TRACE(model);
    const std::string activations = tmp.file(model + "-activations.h5");
    const std::string attention = tmp.file(model + "-attention.h5");
    CommandResult r = run_gradlab({"activations", "--checkpoint", checkpoint(model), "--input",
                                   "3 1 2", "--names", "*hook_pattern", "--out", activations});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    r = run_gradlab(
        {"attention", "--checkpoint", checkpoint(model), "--input", "3 1 2", "--out", attention});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    H5::Exception::dontPrint();
    const H5::H5File ours(activations, H5F_ACC_RDONLY), theirs(attention, H5F_ACC_RDONLY);
    const bool seq2seq = model == "seq2seq";
    const std::vector<std::pair<std::string, std::string>> pairs =
        seq2seq ? std::vector<std::pair<std::string, std::string>>{{"encoder.1.attn.hook_pattern",
                                                                    "encoder_layer_1"},
                                                                   {"decoder.0.attn.hook_pattern",
                                                                    "decoder_layer_0"},
                                                                   {"decoder.1.cross_attn.hook_"
                                                                    "pattern",
                                                                    "decoder_cross_layer_1"}}
                : std::vector<std::pair<std::string, std::string>>{
                      {"blocks.0.attn.hook_pattern", "layer_0"},
                      {"blocks.1.attn.hook_pattern", "layer_1"}};
    for (const auto& [point, layer] : pairs) {
      std::vector<hsize_t> ours_dims, theirs_dims;
      const std::vector<float> a = read_floats(ours, point, ours_dims);
      const std::vector<float> b = read_floats(theirs, layer, theirs_dims);
      ASSERT_EQ(ours_dims, theirs_dims) << point;
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6) << point << " at " << i;
      EXPECT_EQ(letters_of(ours, point), "[H, Tq, Tk]");
    }
    EXPECT_TRUE(ours.nameExists("inputs"));
    EXPECT_EQ(ours.nameExists("source"), seq2seq);
    EXPECT_FALSE(ours.nameExists("hook_logits"));
  }
}

TEST_F(HooksCliTest, GradientsHaveTheShapesOfTheirActivations) {
  TempDir tmp;
  const std::string out = tmp.file("gradients.h5");
  const CommandResult r = run_gradlab({"activations", "--checkpoint", checkpoint("decoder"),
                                       "--input", "3 1 2", "--names", "blocks.1.hook_resid_mid",
                                       "embed.hook_position", "--gradients", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "wrote 4 activations")) << r.out;
  H5::Exception::dontPrint();
  const H5::H5File file(out, H5F_ACC_RDONLY);
  for (const std::string name : {"blocks.1.hook_resid_mid", "embed.hook_position"}) {
    std::vector<hsize_t> dims, grad_dims;
    read_floats(file, name, dims);
    const std::vector<float> grad = read_floats(file, name + "_grad", grad_dims);
    EXPECT_EQ(dims, grad_dims) << name;
    // T = 3 + 1 + 3 - 1 = 6 decoder inputs, C = 16; positions have no batch axis either way.
    EXPECT_EQ(dims, (std::vector<hsize_t>{6, 16})) << name;
    double norm = 0;
    for (float g : grad) norm += static_cast<double>(g) * g;
    EXPECT_GT(norm, 0.0) << name;
  }
  EXPECT_EQ(letters_of(file, "embed.hook_position"), "[T, C]");
}

TEST_F(HooksCliTest, BadNamesAndOutputsAreUsageErrors) {
  TempDir tmp;
  CommandResult r =
      run_gradlab({"activations", "--checkpoint", checkpoint("decoder"), "--input", "3 1 2",
                   "--names", "blocks.0.attn.hook_patern", "--out", tmp.file("never.h5")});
  expect_usage_error(
      r, "activations",
      {"'blocks.0.attn.hook_patern' matches no hook point", "closest: blocks.0.attn.hook_pattern"});
  EXPECT_FALSE(fs::exists(tmp.file("never.h5")));
  r = run_gradlab({"activations", "--checkpoint", checkpoint("decoder"), "--input", "3 1 2",
                   "--out", checkpoint("seq2seq")});
  expect_usage_error(r, "activations", {"is a checkpoint", "the activations"});
  r = run_gradlab({"hooks"});
  expect_usage_error(r, "hooks", "--checkpoint");
  for (const char* command : {"hooks", "activations"}) {
    r = run_gradlab({command, "--help"});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_TRUE(contains(r.out, std::string("gradlab ") + command)) << r.out;
  }
}

TEST_F(HooksCliTest, ActivationsReadALanguageModelsTextPrompt) {
  TempDir tmp;
  const std::string out = tmp.file("text.h5");
  const CommandResult r =
      run_gradlab({"activations", "--checkpoint", checkpoint("text"), "--prompt", "the cat",
                   "--names", "blocks.1.hook_resid_post", "hook_logits", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  H5::Exception::dontPrint();
  const H5::H5File file(out, H5F_ACC_RDONLY);
  std::vector<hsize_t> dims;
  EXPECT_EQ(read_values<int64_t>(file, "inputs", dims), tiny_text_tokens("the cat"));
  const std::vector<int64_t> answer = read_values<int64_t>(file, "answer", dims);
  ASSERT_EQ(answer.size(), 1u);
  // The answer is the greedy next token: the largest logit at the last position.
  const std::vector<float> logits = read_floats(file, "hook_logits", dims);
  const auto vocabulary =
      static_cast<hsize_t>(std::set<char>(kTinyText.begin(), kTinyText.end()).size());
  ASSERT_EQ(dims, (std::vector<hsize_t>{7, vocabulary}));  // T = 7: "the cat"
  const auto last = logits.end() - static_cast<std::ptrdiff_t>(vocabulary);
  EXPECT_EQ(answer[0], std::max_element(last, logits.end()) - last);
  read_floats(file, "blocks.1.hook_resid_post", dims);
  EXPECT_EQ(dims, (std::vector<hsize_t>{7, 8}));
  EXPECT_EQ(run_gradlab({"attention", "--checkpoint", checkpoint("text"), "--prompt", "the",
                         "--out", tmp.file("attention.h5")})
                .exit_code,
            0);
}

TEST_F(HooksCliTest, EachCheckpointTakesItsOwnPromptFlag) {
  TempDir tmp;
  const std::string out = tmp.file("never.h5");
  const auto activations = [&](std::vector<std::string> args) {
    return run_gradlab(with({"activations", "--out", out}, args));
  };
  expect_usage_error(activations({"--checkpoint", checkpoint("decoder"), "--prompt", "3 1 2"}),
                     "activations", {"toy task", "--input", "not --prompt"});
  expect_usage_error(activations({"--checkpoint", checkpoint("text"), "--input", "3 1 2"}),
                     "activations", {"language model", "--prompt", "not --input"});
  expect_usage_error(
      activations({"--checkpoint", checkpoint("text"), "--input", "3", "--prompt", "the"}),
      "activations", {"exactly one of --input", "--prompt"});
  expect_usage_error(activations({"--checkpoint", checkpoint("text")}), "activations",
                     {"exactly one of --input", "--prompt"});
  expect_usage_error(activations({"--checkpoint", checkpoint("text"), "--prompt", ""}),
                     "activations", "--prompt must not be empty");
  expect_usage_error(activations({"--checkpoint", checkpoint("text"), "--prompt", "the cat sat"}),
                     "activations", {"--prompt", "11 tokens", "context is 8"});
  expect_usage_error(activations({"--checkpoint", checkpoint("text"), "--prompt", "the\x01"}),
                     "activations",
                     {"--prompt", "'\\x01' (U+0001)", "not in the model's vocabulary"});
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(HooksCliTest, ACacheAboveMaxMemoryIsRefusedNamingNames) {
  TempDir tmp;
  const std::string out = tmp.file("never.h5");
  const auto activations = [&](std::vector<std::string> args) {
    return run_gradlab(with(
        {"activations", "--checkpoint", checkpoint("decoder"), "--input", "3 1 2", "--out", out},
        args));
  };
  // hook_logits [T = 6, V = 5] in float32: 120 bytes, 1.12e-07 GiB; twice that with gradients.
  expect_usage_error(activations({"--names", "hook_logits", "--max-memory", "1e-9"}), "activations",
                     {"the cache of --names needs about 1.12e-07 GiB",
                      "above the limit of 1e-09 GiB", "(--max-memory)", "--names narrows it"});
  expect_usage_error(activations({"--names", "hook_logits", "--gradients", "--max-memory", "1e-9"}),
                     "activations", "needs about 2.24e-07 GiB");
  expect_usage_error(activations({"--max-memory", "-1"}), "activations",
                     "--max-memory must be a number of GiB >= 0");
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(activations({"--names", "hook_logits", "--max-memory", "1e-6"}).exit_code, 0);
}

}  // namespace test_hooks_cli
}  // namespace gradlab::testing
