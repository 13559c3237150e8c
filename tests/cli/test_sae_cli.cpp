// `gradlab sae train|eval|features` on a tiny checkpoint, `--intervene POINT=sae:FILE`, and the
// refusals: flags of another subcommand, an --out that holds files, an SAE of another model or
// point, a file that is not an SAE's.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/cli_runner.h"
#include "tests/test_helpers.h"

namespace gradlab::testing {
namespace test_sae_cli {

const char* const kPoint = "blocks.0.hook_resid_post";

size_t lines_of(const std::string& path) {
  std::ifstream in(path);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

TEST(SaeCli, TrainsEvaluatesListsFeaturesAndSplicesIn) {
  TempDir tmp;
  const std::string model = toy_checkpoint(kTiny, "decoder");
  const std::string dir = tmp.file("run");
  CommandResult r =
      run_gradlab({"sae", "train", "--checkpoint", model, "--hook", kPoint, "--d-sae", "16", "--l1",
                   "0.01", "--lr", "1e-2", "--steps", "20", "--log-every", "10", "--out", dir});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "step 20: ")) << r.out;
  std::ifstream csv(dir + "/metrics.csv");
  std::string header;
  std::getline(csv, header);
  for (const char* column :
       {"l0", "explained_variance", "mse", "l1", "dead_features", "ce_loss_score"}) {
    EXPECT_TRUE(contains(header, column)) << header;
  }
  EXPECT_EQ(lines_of(dir + "/metrics.csv"), 3u);  // the header, steps 10 and 20
  const std::string sae = dir + "/sae.h5";

  r = run_gradlab({"sae", "eval", "--sae", sae, "--checkpoint", model});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "CE loss score")) << r.out;
  EXPECT_TRUE(contains(r.out, "explained variance")) << r.out;

  r = run_gradlab(
      {"sae", "features", "--sae", sae, "--checkpoint", model, "--top", "2", "--tokens", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "feature ")) << r.out;
  EXPECT_TRUE(contains(r.out, "logit effect: ")) << r.out;
  EXPECT_TRUE(contains(r.out, "position")) << r.out;

  // The splice changes the held-out loss; zero-ablation and the SAE differ too.
  const CommandResult clean = run_gradlab({"eval", "--checkpoint", model});
  const CommandResult spliced = run_gradlab(
      {"eval", "--checkpoint", model, "--intervene", std::string(kPoint) + "=sae:" + sae});
  ASSERT_EQ(clean.exit_code, 0) << clean.describe();
  ASSERT_EQ(spliced.exit_code, 0) << spliced.describe();
  EXPECT_NE(clean.out, spliced.out);

  // Refusals.
  expect_usage_error(run_gradlab({"eval", "--checkpoint", model, "--intervene",
                                  "blocks.0.hook_resid_pre=sae:" + sae}),
                     "eval", {"the SAE was trained on", kPoint});
  expect_usage_error(run_gradlab({"eval", "--checkpoint", toy_checkpoint(kTiny, "seq2seq"),
                                  "--intervene", std::string(kPoint) + "=sae:" + sae}),
                     "eval");
  expect_usage_error(run_gradlab({"sae", "eval", "--sae", sae, "--checkpoint", tiny_text_model()}),
                     "sae", "trained on another model");
  expect_usage_error(run_gradlab({"sae", "train", "--checkpoint", model, "--hook", kPoint,
                                  "--d-sae", "4", "--steps", "1", "--out", dir}),
                     "sae", {"already holds files", "--overwrite"});
  const std::string broken = tmp.file("broken.h5");
  std::ofstream(broken) << "not an sae";
  const CommandResult bad = run_gradlab({"sae", "eval", "--sae", broken, "--checkpoint", model});
  EXPECT_EQ(bad.exit_code, 1) << bad.describe();
  EXPECT_TRUE(contains(bad.err, "broken.h5")) << bad.err;
  expect_usage_error(run_gradlab({"eval", "--checkpoint", model, "--intervene",
                                  std::string(kPoint) + "=sae:" + broken}),
                     "eval", "broken.h5");
}

TEST(SaeCli, RefusesBadFlags) {
  const std::string model = toy_checkpoint(kTiny, "decoder");
  expect_usage_error(run_gradlab({"sae", "--checkpoint", model}), "sae", "no subcommand");
  expect_usage_error(run_gradlab({"sae", "fit", "--checkpoint", model}), "sae", "'fit'");
  expect_usage_error(
      run_gradlab({"sae", "eval", "--checkpoint", model, "--sae", model, "--d-sae", "4"}), "sae",
      {"--d-sae", "train"});
  expect_usage_error(
      run_gradlab({"sae", "train", "--checkpoint", model, "--hook", kPoint, "--out", "x"}), "sae",
      "--d-sae");
  expect_usage_error(run_gradlab({"sae", "train", "--checkpoint", model, "--hook", kPoint,
                                  "--d-sae", "4", "--top-k", "5", "--out", "x"}),
                     "sae", "top_k 5");
  expect_usage_error(run_gradlab({"sae", "train", "--checkpoint", model, "--hook", "nowhere",
                                  "--d-sae", "4", "--steps", "1", "--out", "/nonexistent-dir/x"}),
                     "sae", "nowhere");
}

}  // namespace test_sae_cli
}  // namespace gradlab::testing
