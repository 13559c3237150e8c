// `gradlab patch --path`: a head into every later input scores as activation patching of the
// head does, the file holds the one row, and bad specs are usage errors naming the spec.
#include <H5Cpp.h>
#include <gtest/gtest.h>

#include "tests/cli_runner.h"
#include "tests/h5_reading.h"
#include "tests/test_helpers.h"

namespace gradlab::testing {
namespace test_path_patch_cli {

// The copy task the patching tests train (tests/cli/test_ablate_patch_cli.cpp): shared.
const std::vector<std::string> kModel = {
    "--length",    "4",  "--symbols", "5",   "--d-model",    "16",
    "--heads",     "2",  "--d-ff",    "16",  "--batch-size", "16",
    "--eval-size", "64", "--steps",   "600", "--eval-every", "50"};

std::vector<double> scores_in(const std::string& path, std::vector<std::string>* rows) {
  H5::Exception::dontPrint();
  const H5::H5File file(path, H5F_ACC_RDONLY);
  std::vector<hsize_t> dims;
  *rows = read_strings(file, "rows");
  return read_values<double>(file, "scores", dims);
}

TEST(PathPatchCli, AHeadIntoEveryLaterInputScoresAsActivationPatchingOfIt) {
  TempDir tmp;
  const std::string checkpoint = toy_checkpoint(kModel, "decoder");
  const std::vector<std::string> prompts{"--clean", "1 2 3 4", "--corrupt", "1 2 5 4"};
  CommandResult r = run_gradlab(with({"patch", "--checkpoint", checkpoint, "--names",
                                      "blocks.0.attn.hook_result", "--out", tmp.file("a.h5")},
                                     prompts));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::string path = "0.1 -> 0.mlp, 1.0, 1.1, 1.mlp, logits";
  r = run_gradlab(with(
      {"patch", "--checkpoint", checkpoint, "--path", path, "--out", tmp.file("p.h5")}, prompts));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "path " + path)) << r.out;
  std::vector<std::string> activation_rows, path_rows;
  const std::vector<double> activation = scores_in(tmp.file("a.h5"), &activation_rows);
  const std::vector<double> scores = scores_in(tmp.file("p.h5"), &path_rows);
  ASSERT_EQ(activation_rows.size(), 2u);
  EXPECT_EQ(activation_rows[1], "blocks.0.attn.hook_result head 1");
  EXPECT_EQ(path_rows, std::vector<std::string>{"path " + path});
  ASSERT_EQ(scores.size(), 1u);
  EXPECT_NEAR(scores[0], activation[1], 1e-4);  // float32 runs on different attention paths
}

TEST(PathPatchCli, BadSpecsAreUsageErrorsNamingTheSpec) {
  const std::string checkpoint = toy_checkpoint(kModel, "decoder");
  const std::vector<std::string> prompts{"--clean", "1 2 3 4", "--corrupt", "1 2 5 4"};
  CommandResult r =
      run_gradlab(with({"patch", "--checkpoint", checkpoint, "--path", "0.7 -> logits"}, prompts));
  expect_usage_error(r, "patch", {"path '0.7 -> logits'", "unknown head 7"});
  r = run_gradlab(with({"patch", "--checkpoint", checkpoint, "--path", "1.0 -> 0.1.q"}, prompts));
  expect_usage_error(r, "patch", {"receiver 0.1.q comes before every sender"});
  r = run_gradlab(with(
      {"patch", "--checkpoint", checkpoint, "--path", "0.0 -> logits", "--names", "hook_logits"},
      prompts));
  expect_usage_error(r, "patch", {"--path", "--names"});
}

}  // namespace test_path_patch_cli
}  // namespace gradlab::testing
