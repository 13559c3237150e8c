// --intervene on the command line: eval's zeroed head scores what the ablation table's row for
// that head does, a subspace read from a file or a resampled point changes the metrics, every
// command that runs a model runs it intervened on, and bad specs are usage errors.
#include <H5Cpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "tests/cli_runner.h"
#include "tests/test_helpers.h"

namespace gradlab::testing {
namespace test_intervene_cli {

// The ablate command line tests' toy model (the same shared run): copy, length 4, 2 heads.
const std::vector<std::string> kModel = {
    "--length",    "4",  "--symbols", "5",   "--d-model",    "16",
    "--heads",     "2",  "--d-ff",    "16",  "--batch-size", "16",
    "--eval-size", "64", "--steps",   "600", "--eval-every", "50"};

// Two parameters of the toy model: the token embedding [7, 16] and the positions' [9, 16]
// (checkpoints hold them as /model/NAME).
constexpr const char* kEmbedding = "embed.token_embedding.weight";
constexpr const char* kPositions = "embed.position_embedding.weight";

double number_after(const std::string& text, const std::string& label) {
  const size_t at = text.find(label);
  EXPECT_NE(at, std::string::npos) << label << " in\n" << text;
  return at == std::string::npos ? 0 : std::stod(text.substr(at + label.size()));
}

// The fields of the CSV row whose first two fields are point and head.
std::vector<std::string> csv_row(const std::string& path, const std::string& point,
                                 const std::string& head) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> fields;
    std::istringstream fields_in(line);
    for (std::string field; std::getline(fields_in, field, ',');) fields.push_back(field);
    if (fields.size() > 2 && fields[0] == point && fields[1] == head) return fields;
  }
  ADD_FAILURE() << "no row " << point << "," << head << " in " << path;
  return {"", "", "0", "0", "0"};
}

TEST(InterventionCli, AZeroedHeadScoresWhatAblatesRowDoes) {
  TempDir tmp;
  const std::string checkpoint = toy_checkpoint(kModel, "decoder");
  const std::string csv = tmp.file("ablation.csv");
  CommandResult r = run_gradlab({"ablate", "--checkpoint", checkpoint, "--out", csv});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::vector<std::string> row = csv_row(csv, "blocks.0.attn.hook_z", "1");

  r = run_gradlab(
      {"eval", "--checkpoint", checkpoint, "--intervene", "blocks.0.attn.hook_z:1=zero"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  // Both sides are the same numbers, rounded as printed: the CSV to 6 significant digits, eval's
  // loss to 6 decimals and its exact match to 4.
  const double loss = std::stod(row[2]);
  EXPECT_NEAR(number_after(r.out, "loss "), loss, 5e-6 * std::max(1.0, loss) + 5e-7) << r.out;
  EXPECT_NEAR(number_after(r.out, "exact match "), std::stod(row[4]), 5e-5 + 5e-6) << r.out;

  const CommandResult intact = run_gradlab({"eval", "--checkpoint", checkpoint});
  ASSERT_EQ(intact.exit_code, 0) << intact.describe();
  EXPECT_NE(number_after(intact.out, "loss "), number_after(r.out, "loss ")) << r.out;
}

TEST(InterventionCli, KeepingTheWholeSpaceChangesNothingAndProjectingItOutHurts) {
  TempDir tmp;
  const std::string checkpoint = toy_checkpoint(kModel, "decoder");
  {
    H5::H5File file(tmp.file("basis.h5"), H5F_ACC_TRUNC);
    const hsize_t dims[2] = {16, 16};  // the whole residual stream, rows not orthonormal
    std::vector<double> rows(256, 0.0);
    for (int i = 0; i < 16; ++i) rows[static_cast<size_t>(i * 16 + i)] = 2.0 + i;
    rows[1] = 0.5;
    H5::DataSet set = file.createDataSet("all", H5::PredType::IEEE_F64LE, H5::DataSpace(2, dims));
    set.write(rows.data(), H5::PredType::NATIVE_DOUBLE);
  }
  const std::string all = tmp.file("basis.h5") + "#all";
  const CommandResult intact = run_gradlab({"eval", "--checkpoint", checkpoint});
  CommandResult r = run_gradlab(
      {"eval", "--checkpoint", checkpoint, "--intervene", "blocks.1.hook_resid_pre=keep:" + all});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NEAR(number_after(r.out, "loss "), number_after(intact.out, "loss "), 1e-5) << r.out;
  r = run_gradlab({"eval", "--checkpoint", checkpoint, "--intervene",
                   "blocks.1.hook_resid_pre=project-out:" + all});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_GT(number_after(r.out, "loss "), number_after(intact.out, "loss ") + 0.1) << r.out;
}

TEST(InterventionCli, BadSpecsAreUsageErrors) {
  TempDir tmp;
  const std::string checkpoint = toy_checkpoint(kModel, "decoder");
  auto eval = [&](const std::string& spec) {
    return run_gradlab({"eval", "--checkpoint", checkpoint, "--intervene", spec});
  };
  expect_usage_error(eval("blocks.0.attn.hook_z:1=halve"), "eval",
                     {"--intervene", "'blocks.0.attn.hook_z:1=halve'", "unknown kind"});
  expect_usage_error(eval("blocks.0.attn.hook_z=keep:" + tmp.file("none.h5") + "#m"), "eval",
                     {"no such file"});
  expect_usage_error(eval("blocks.0.attn.hook_z=keep"), "eval", {"needs FILE.h5#DATASET"});
  expect_usage_error(eval("blocks.0.attn.hook_zz=zero"), "eval",
                     {"neither a hook point nor a parameter", "blocks.0.attn.hook_z"});
  expect_usage_error(eval("blocks.0.attn.hook_z:2=zero"), "eval", {"past"});
}

TEST(InterventionCli, ArraysOfAnotherShapeAreRefusedNamingBothShapes) {
  const std::string checkpoint = toy_checkpoint(kModel, "decoder");
  auto eval = [&](const std::string& spec) {
    return run_gradlab({"eval", "--checkpoint", checkpoint, "--intervene", spec});
  };
  // A parameter replaced by an array of another shape: both shapes named.
  expect_usage_error(
      eval(std::string(kEmbedding) + "=value:" + checkpoint + "#model/" + kPositions), "eval",
      {"[9,16]", "[7,16]"});
  expect_usage_error(
      eval("blocks.0.hook_resid_pre=value:" + checkpoint + "#model/blocks.0.ln1.weight"), "eval",
      {"[16]", "[1,8,16]"});
  // An array of fewer positions than the pass runs: found when the pass runs.
  expect_runtime_failure(
      eval("blocks.0.hook_resid_pre=value:" + checkpoint + "#model/" + kEmbedding), "eval",
      {"[7,16]", "[16,8,16]"});
}

TEST(InterventionCli, ResampleChangesTheScores) {
  const std::string checkpoint = toy_checkpoint(kModel, "decoder");
  const CommandResult intact = run_gradlab({"eval", "--checkpoint", checkpoint});
  const CommandResult r = run_gradlab(
      {"eval", "--checkpoint", checkpoint, "--intervene", "blocks.0.hook_resid_pre=resample"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_GT(number_after(r.out, "loss "), number_after(intact.out, "loss ") + 0.1) << r.out;
}

// What a command prints as it is, with an intervention that changes nothing (a parameter replaced
// by its own values, read from the checkpoint) and with one that changes the run.
struct ThreeRuns {
  CommandResult intact, unchanged, changed;
};

ThreeRuns three_runs(const std::vector<std::string>& args, const std::string& checkpoint,
                     const std::string& changing) {
  ThreeRuns runs;
  runs.intact = run_gradlab(args);
  std::vector<std::string> with = args;
  with.insert(with.end(), {"--intervene", std::string(kEmbedding) + "=value:" + checkpoint +
                                              "#model/" + kEmbedding});
  runs.unchanged = run_gradlab(with);
  with = args;
  with.insert(with.end(), {"--intervene", changing});
  runs.changed = run_gradlab(with);
  for (const CommandResult* r : {&runs.intact, &runs.unchanged, &runs.changed}) {
    EXPECT_EQ(r->exit_code, 0) << r->describe();
  }
  EXPECT_EQ(runs.unchanged.out, runs.intact.out);
  EXPECT_NE(runs.changed.out, runs.intact.out);
  return runs;
}

TEST(InterventionCli, PredictDecodesIntervened) {
  const std::string checkpoint = toy_checkpoint(kModel, "decoder");
  const ThreeRuns predict =
      three_runs({"predict", "--checkpoint", checkpoint, "--input", "1 2 3 4"}, checkpoint,
                 "blocks.0.hook_resid_pre=zero");
  EXPECT_TRUE(contains(predict.intact.out, "correct")) << predict.intact.out;
  EXPECT_TRUE(contains(predict.changed.out, "wrong")) << predict.changed.out;
}

TEST(InterventionCli, LensReadsTheIntervenedRun) {
  const std::string checkpoint = toy_checkpoint(kModel, "decoder");
  three_runs({"lens", "--checkpoint", checkpoint, "--input", "1 2 3 4"}, checkpoint,
             "blocks.1.attn.hook_z:0=zero");
}

TEST(InterventionCli, DlaAttributesTheIntervenedRun) {
  const std::string checkpoint = toy_checkpoint(kModel, "decoder");
  three_runs({"dla", "--checkpoint", checkpoint, "--input", "1 2 3 4"}, checkpoint,
             "blocks.1.attn.hook_z:0=zero");
  three_runs({"dla", "--checkpoint", checkpoint, "--held-out", "8"}, checkpoint,
             "blocks.1.attn.hook_z:0=mean");
}

TEST(InterventionCli, PatchIntervenesInTheCleanAndTheCorruptedRuns) {
  const std::string checkpoint = toy_checkpoint(kModel, "decoder");
  // Both runs intervened on: the clean and corrupted logit differences both move, and head 0,
  // zeroed in the clean run as in the corrupted one, brings nothing over when patched.
  const ThreeRuns patch = three_runs({"patch", "--checkpoint", checkpoint, "--clean", "1 2 3 4",
                                      "--corrupt", "1 2 5 4", "--names", "blocks.1.attn.hook_z"},
                                     checkpoint, "blocks.1.attn.hook_z:0=zero");
  for (const char* label : {"): clean ", "corrupted -"}) {
    EXPECT_NE(number_after(patch.changed.out, label), number_after(patch.intact.out, label));
  }
  EXPECT_NE(number_after(patch.intact.out, "hook_z head 0 "), 0.0) << patch.intact.out;
  EXPECT_EQ(number_after(patch.changed.out, "hook_z head 0 "), 0.0) << patch.changed.out;
  const CommandResult help = run_gradlab({"patch", "--help"});
  // The help wraps its text at a width that depends on the longest flag: compared as words.
  std::string words;
  std::istringstream help_words(help.out);
  for (std::string word; help_words >> word;) words += word + " ";
  EXPECT_TRUE(contains(words, "the clean and the corrupted runs alike")) << help.out;
}

TEST(InterventionCli, SampleRunsIntervened) {
  const std::string checkpoint = tiny_text_model();
  const std::vector<std::string> args = {"sample",   "--checkpoint",  checkpoint,
                                         "--prompt", "the ",          "--tokens",
                                         "12",       "--temperature", "0"};
  ThreeRuns runs;
  runs.intact = run_gradlab(args);
  std::vector<std::string> with = args;
  with.insert(with.end(), {"--intervene", "blocks.0.hook_resid_pre=zero"});
  runs.changed = run_gradlab(with);
  ASSERT_EQ(runs.intact.exit_code, 0) << runs.intact.describe();
  ASSERT_EQ(runs.changed.exit_code, 0) << runs.changed.describe();
  EXPECT_NE(runs.changed.out, runs.intact.out);
}

}  // namespace test_intervene_cli
}  // namespace gradlab::testing
