// `gradlab ablate` and `gradlab patch` on decoder, encoder-decoder and text checkpoints: the
// ablation table against `gradlab eval`, the patching scores at the sites whose answer is known
// (everything patched: 1; nothing that differs: 0), the files and the errors.
#include <H5Cpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "tests/cli_runner.h"
#include "tests/h5_reading.h"
#include "tests/test_helpers.h"

namespace gradlab::testing {
namespace test_ablate_patch_cli {

namespace fs = std::filesystem;

// Copy task of length 4 with symbols 1..5, trained until 99% of the held-out set is exact.
const std::vector<std::string> kModel = {
    "--length",    "4",  "--symbols", "5",   "--d-model",    "16",
    "--heads",     "2",  "--d-ff",    "16",  "--batch-size", "16",
    "--eval-size", "64", "--steps",   "600", "--eval-every", "50"};

class AblatePatchCliTest : public ::testing::Test {
 protected:
  // The toy models, or "text": a one-layer character model of kTinyText (context 12).
  static std::string checkpoint(const std::string& model) {
    if (model != "text") return toy_checkpoint(kModel, model);
    return (shared_run({"train", "--task", "text", "--data", tiny_text_data(), "--context", "12",
                        "--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "16",
                        "--steps", "150", "--eval-iters", "4"})
                .dir /
            "best.h5")
        .string();
  }
};

// The CSV's rows as fields.
std::vector<std::vector<std::string>> read_csv(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> fields;
    std::istringstream fields_in(line);
    for (std::string field; std::getline(fields_in, field, ',');) fields.push_back(field);
    if (!line.empty() && line.back() == ',') fields.emplace_back();
    rows.push_back(fields);
  }
  return rows;
}

double number_after(const std::string& text, const std::string& label) {
  const size_t at = text.find(label);
  EXPECT_NE(at, std::string::npos) << label << " in\n" << text;
  return at == std::string::npos ? 0 : std::stod(text.substr(at + label.size()));
}

// The scores of the rows of a patching file.
std::map<std::string, std::vector<double>> scores_of(const std::string& path) {
  H5::Exception::dontPrint();
  const H5::H5File file(path, H5F_ACC_RDONLY);
  std::vector<hsize_t> dims;
  const std::vector<double> scores = read_values<double>(file, "scores", dims);
  const std::vector<std::string> rows = read_strings(file, "rows");
  std::map<std::string, std::vector<double>> out;
  for (size_t r = 0; r < rows.size(); ++r) {
    out[rows[r]].assign(scores.begin() + r * dims[1], scores.begin() + (r + 1) * dims[1]);
  }
  return out;
}

TEST_F(AblatePatchCliTest, AblateKnocksOutEveryHeadAndFeedForwardSublayer) {
  TempDir tmp;
  for (const std::string model : {"decoder", "seq2seq"}) {
    SCOPED_TRACE(model);
    const std::string csv = tmp.file(model + ".csv");
    CommandResult r = run_gradlab({"ablate", "--checkpoint", checkpoint(model), "--out", csv});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_TRUE(contains(r.out, "held-out loss with one part knocked out")) << r.out;
    EXPECT_TRUE(contains(r.out, "exact match with one part knocked out")) << r.out;
    EXPECT_TRUE(contains(r.out, "the most important part: ")) << r.out;
    const auto rows = read_csv(csv);
    ASSERT_GE(rows.size(), 2u);
    EXPECT_EQ(rows[0], (std::vector<std::string>{"point", "head", "loss", "token_accuracy",
                                                 "exact_match", "loss_increase"}));
    EXPECT_EQ(rows[1][0], "intact");
    // decoder: 2 blocks of 2 heads and a ffn; seq2seq: 2 encoder blocks of the same, 2 decoder
    // blocks with 2 self- and 2 cross-attention heads and a ffn.
    EXPECT_EQ(rows.size(), 2u + (model == "decoder" ? 6u : 6u + 10u));
    EXPECT_EQ(rows[2][0], model == "decoder" ? "blocks.0.attn.hook_z" : "encoder.0.attn.hook_z");
    EXPECT_EQ(rows[2][1], "0");
    EXPECT_EQ(rows[4][0], model == "decoder" ? "blocks.0.hook_mlp_out" : "encoder.0.hook_mlp_out");
    EXPECT_EQ(rows[4][1], "");
    // The intact model is the one `gradlab eval` scores.
    r = run_gradlab({"eval", "--checkpoint", checkpoint(model)});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_NEAR(std::stod(rows[1][2]), number_after(r.out, "loss "), 1e-6);
    double largest_increase = 0;
    for (size_t i = 2; i < rows.size(); ++i) {
      largest_increase = std::max(largest_increase, std::stod(rows[i][5]));
    }
    EXPECT_GT(largest_increase, 0.1) << "a trained model depends on some part";
  }
}

TEST_F(AblatePatchCliTest, AblateAndPatchReadALanguageModel) {
  TempDir tmp;
  std::ofstream(tmp.file("other.txt")) << "the dog sat on the cat.\n";
  CommandResult r = run_gradlab({"ablate", "--checkpoint", checkpoint("text"), "--mode", "mean",
                                 "--data", tmp.file("other.txt")});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "mean ablation")) << r.out;
  EXPECT_TRUE(contains(r.out, "blocks.0.attn")) << r.out;
  EXPECT_FALSE(contains(r.out, "exact match")) << r.out;

  // A language model's answer is the token it says after the text: "the ca" -> 't', "the do" ->
  // 'g'.
  const std::string out = tmp.file("text.h5");
  r = run_gradlab({"patch", "--checkpoint", checkpoint("text"), "--clean", "the ca", "--corrupt",
                   "the do", "--names", "hook_logits", "embed.hook_position",
                   "blocks.0.hook_resid_pre", "--per-position", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "clean 'the ca' -> 't'; corrupted 'the do' -> 'g'")) << r.out;
  EXPECT_TRUE(contains(r.out, "'c'/'d'")) << r.out;
  auto scores = scores_of(out);
  EXPECT_EQ(scores["hook_logits"].back(), 1.0);
  EXPECT_EQ(scores["embed.hook_position"].back(), 0.0);
  const std::vector<double>& resid = scores["blocks.0.hook_resid_pre"];
  ASSERT_EQ(resid.size(), 6u);
  for (size_t t = 0; t < 4; ++t) EXPECT_EQ(resid[t], 0.0) << "position " << t;
  r = run_gradlab(
      {"patch", "--checkpoint", checkpoint("text"), "--clean", "the ca", "--corrupt", "the q"});
  expect_usage_error(r, "patch", {"--corrupt", "'q'"});
}

TEST_F(AblatePatchCliTest, AblateRefusesBadModesAndOutputs) {
  TempDir tmp;
  CommandResult r =
      run_gradlab({"ablate", "--checkpoint", checkpoint("decoder"), "--mode", "half"});
  expect_usage_error(r, "ablate", {"--mode", "'half'", "zero or mean"});
  std::ofstream(tmp.file("taken.csv")) << "mine\n";
  r = run_gradlab(
      {"ablate", "--checkpoint", checkpoint("decoder"), "--out", tmp.file("taken.csv")});
  expect_usage_error(r, "ablate", {"already exists", "--overwrite"});
  EXPECT_EQ(read_text(tmp.file("taken.csv")), "mine\n");
  r = run_gradlab({"ablate", "--checkpoint", checkpoint("decoder"), "--out", checkpoint("seq2seq"),
                   "--overwrite"});
  expect_usage_error(r, "ablate", {"is a checkpoint"});
  r = run_gradlab({"ablate", "--checkpoint", tmp.file("missing.h5")});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
}

// --together knocks a set out at once, in the table's own names; its row joins the CSV, and a
// name that is no part of the model is a usage error listing the parts.
TEST_F(AblatePatchCliTest, AblateKnocksOutASetTogether) {
  TempDir tmp;
  const std::string csv = tmp.file("set.csv");
  CommandResult r = run_gradlab({"ablate", "--checkpoint", checkpoint("decoder"), "--together",
                                 "blocks.0.attn:*", "blocks.1.ffn", "--out", csv});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out,
                       "knocked out together: blocks.0.attn:0 blocks.0.attn:1 "
                       "blocks.1.ffn\n  loss "))
      << r.out;
  const auto rows = read_csv(csv);
  ASSERT_EQ(rows.size(), 2u + 6u + 1u);
  EXPECT_EQ(rows.back()[0], "together: blocks.0.attn:0 blocks.0.attn:1 blocks.1.ffn");
  EXPECT_EQ(rows.back()[1], "");
  EXPECT_GT(std::stod(rows.back()[5]), 0.1) << "the copying layer's heads are out";

  // A list of heads names the same parts as each head on its own.
  const std::string listed = tmp.file("listed.csv");
  r = run_gradlab({"ablate", "--checkpoint", checkpoint("decoder"), "--together",
                   "blocks.0.attn:1,0", "blocks.1.ffn", "--out", listed});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_csv(listed).back(), rows.back());

  for (const char* bad : {"blocks.0.attn:2", "blocks.0.attn:", "blocks.0.attn", "blocks.9.ffn"}) {
    r = run_gradlab({"ablate", "--checkpoint", checkpoint("decoder"), "--together", bad});
    expect_usage_error(
        r, "ablate", {"--together", "names no part of this model", "blocks.1.attn:1 blocks.1.ffn"});
  }
}

TEST_F(AblatePatchCliTest, PatchScoresZeroForTheCorruptedRunAndOneForTheCleanRun) {
  TempDir tmp;
  const std::string out = tmp.file("decoder.h5");
  CommandResult r =
      run_gradlab({"patch", "--checkpoint", checkpoint("decoder"), "--clean", "1 2 3 4",
                   "--corrupt", "1 2 5 4", "--names", "hook_logits", "blocks.0.hook_resid_pre",
                   "embed.hook_position", "blocks.1.attn.hook_z", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "1 2 3 4 -> 1 2 3 4")) << r.out;
  auto scores = scores_of(out);
  EXPECT_EQ(scores["hook_logits"], std::vector<double>{1.0});
  EXPECT_EQ(scores["blocks.0.hook_resid_pre"], std::vector<double>{1.0});
  EXPECT_EQ(scores["embed.hook_position"], std::vector<double>{0.0});
  EXPECT_TRUE(scores.count("blocks.1.attn.hook_z head 1")) << r.out;

  // One position at a time: the prompts differ at position 2 only, and nothing before it can
  // see the difference.
  r = run_gradlab({"patch", "--checkpoint", checkpoint("decoder"), "--clean", "1 2 3 4",
                   "--corrupt", "1 2 5 4", "--names", "blocks.0.hook_resid_pre", "--per-position",
                   "--out", out, "--overwrite"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  scores = scores_of(out);
  const std::vector<double>& row = scores["blocks.0.hook_resid_pre"];
  ASSERT_EQ(row.size(), 8u);  // T = 4 + 1 + 4 - 1
  for (size_t t = 0; t < row.size(); ++t) EXPECT_EQ(row[t], t == 2 ? 1.0 : 0.0) << "position " << t;
}

TEST_F(AblatePatchCliTest, PatchReadsTheEncodersSourcePositions) {
  TempDir tmp;
  const std::string out = tmp.file("seq2seq.h5");
  const CommandResult r =
      run_gradlab({"patch", "--checkpoint", checkpoint("seq2seq"), "--clean", "1 2 3 4",
                   "--corrupt", "5 2 3 4", "--names", "encoder.0.hook_resid_pre",
                   "decoder.0.hook_resid_pre", "--per-position", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  H5::Exception::dontPrint();
  const H5::H5File file(out, H5F_ACC_RDONLY);
  EXPECT_EQ(read_strings(file, "row_axes"), (std::vector<std::string>{"S", "T"}));
  std::vector<hsize_t> dims;
  const std::vector<double> scores = read_values<double>(file, "scores", dims);
  ASSERT_EQ(dims, (std::vector<hsize_t>{2, 4}));
  // The encoder reads the prompt (S = 4): only its first position differs.
  EXPECT_EQ(scores[0], 1.0);
  for (size_t s = 1; s < 4; ++s) EXPECT_EQ(scores[s], 0.0) << s;
  EXPECT_TRUE(file.nameExists("clean_source"));
}

TEST_F(AblatePatchCliTest, AnAttentionOnlyModelHasNoFeedForwardPartsToKnockOutOrPatch) {
  TempDir tmp;
  std::vector<std::string> flags = {"train", "--norm", "none", "--out", tmp.file("run")};
  for (size_t i = 0; i < kModel.size(); i += 2) {
    flags.insert(flags.end(), {kModel[i], kModel[i] == "--d-ff" ? "0" : kModel[i + 1]});
  }
  CommandResult r = run_gradlab(flags);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::string checkpoint = tmp.file("run") + "/best.h5";
  const std::string csv = tmp.file("ablation.csv");
  r = run_gradlab({"ablate", "--checkpoint", checkpoint, "--out", csv});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto rows = read_csv(csv);
  EXPECT_EQ(rows.size(), 2u + 4u) << "the intact model and 2 layers of 2 heads";
  for (const auto& row : rows) EXPECT_FALSE(contains(row[0], "mlp")) << row[0];
  const std::string out = tmp.file("patch.h5");
  r = run_gradlab({"patch", "--checkpoint", checkpoint, "--clean", "1 2 3 4", "--corrupt",
                   "1 2 5 4", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  H5::Exception::dontPrint();
  EXPECT_EQ(read_strings(H5::H5File(out, H5F_ACC_RDONLY), "rows"),
            (std::vector<std::string>{"blocks.0.hook_resid_pre", "blocks.0.hook_attn_out",
                                      "blocks.1.hook_resid_pre", "blocks.1.hook_attn_out"}));
}

TEST_F(AblatePatchCliTest, PatchRefusesPromptsItCannotCompare) {
  TempDir tmp;
  CommandResult r = run_gradlab({"patch", "--checkpoint", checkpoint("decoder"), "--clean",
                                 "1 2 3 4", "--corrupt", "1 2 3 4"});
  expect_usage_error(r, "patch", {"answers both prompts alike", "1 2 3 4"});
  r = run_gradlab(
      {"patch", "--checkpoint", checkpoint("decoder"), "--clean", "1 2 3 4", "--corrupt", "1 2 3"});
  expect_usage_error(r, "patch", "--corrupt");
  r = run_gradlab({"patch", "--checkpoint", checkpoint("decoder"), "--clean", "1 2 3 4",
                   "--corrupt", "1 2 5 4", "--names", "blocks.0.hook_resid_mod"});
  expect_usage_error(r, "patch", {"matches no hook point", "blocks.0.hook_resid_mid"});
  r = run_gradlab({"patch", "--checkpoint", checkpoint("decoder"), "--clean", "1 2 3 4"});
  expect_usage_error(r, "patch", "--corrupt");
  for (const char* command : {"ablate", "patch"}) {
    r = run_gradlab({command, "--help"});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_TRUE(contains(r.out, std::string("gradlab ") + command)) << r.out;
  }
}

}  // namespace test_ablate_patch_cli
}  // namespace gradlab::testing
