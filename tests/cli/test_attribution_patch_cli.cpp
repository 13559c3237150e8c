// `gradlab patch --method attribution` on the toy decoder: the estimates where they are exact
// (the logits, a position where the runs agree), the top sites against `--method activation`,
// the file, and the flags it refuses.
#include <H5Cpp.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "tests/cli_runner.h"
#include "tests/h5_reading.h"
#include "tests/test_helpers.h"

namespace gradlab::testing {
namespace test_attribution_patch_cli {

// As test_ablate_patch_cli's model, so that the two share its run.
const std::vector<std::string> kModel = {
    "--length",    "4",  "--symbols", "5",   "--d-model",    "16",
    "--heads",     "2",  "--d-ff",    "16",  "--batch-size", "16",
    "--eval-size", "64", "--steps",   "600", "--eval-every", "50"};

std::vector<std::string> patch(const std::vector<std::string>& more) {
  std::vector<std::string> args = {"patch",   "--checkpoint", toy_checkpoint(kModel, "decoder"),
                                   "--clean", "1 2 3 4",      "--corrupt",
                                   "1 2 5 4"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// A float64 dataset's values by the row strings of another dataset.
std::map<std::string, double> by_row(const H5::H5File& file, const std::string& rows,
                                     const std::string& values) {
  std::vector<hsize_t> dims;
  const std::vector<double> v = read_values<double>(file, values, dims);
  const std::vector<std::string> names = read_strings(file, rows);
  std::map<std::string, double> out;
  for (size_t r = 0; r < names.size(); ++r) out[names[r]] = v[r * (v.size() / names.size())];
  return out;
}

TEST(AttributionPatchCli, EstimatesEverySiteAndPatchesTheTopOnesExactly) {
  TempDir tmp;
  const std::vector<std::string> names = {"--names", "hook_logits", "blocks.1.hook_resid_post",
                                          "blocks.1.attn.hook_z", "blocks.0.hook_mlp_out"};
  std::vector<std::string> args = patch(names);
  args.insert(args.end(), {"--method", "attribution", "--top", "3", "--out", tmp.file("a.h5")});
  const CommandResult attribution = run_gradlab(args);
  ASSERT_EQ(attribution.exit_code, 0) << attribution.describe();
  EXPECT_TRUE(contains(attribution.out, "exact patching of the 3 sites")) << attribution.out;
  args = patch(names);
  args.insert(args.end(), {"--out", tmp.file("exact.h5")});
  const CommandResult r = run_gradlab(args);
  ASSERT_EQ(r.exit_code, 0) << r.describe();

  H5::Exception::dontPrint();
  const H5::H5File file(tmp.file("a.h5"), H5F_ACC_RDONLY);
  const std::map<std::string, double> estimates = by_row(file, "rows", "scores");
  EXPECT_EQ(estimates.size(), 5u);
  // The metric is linear in the logits: the estimate is the whole way to the clean run.
  EXPECT_NEAR(estimates.at("hook_logits"), 1.0, 1e-4);
  const std::map<std::string, double> exact =
      by_row(H5::H5File(tmp.file("exact.h5"), H5F_ACC_RDONLY), "rows", "scores");
  const std::map<std::string, double> top_exact = by_row(file, "top_rows", "top_exact");
  const std::map<std::string, double> top_estimates = by_row(file, "top_rows", "top_attribution");
  ASSERT_EQ(top_exact.size(), 3u);
  double smallest_top = 1e300, largest_rest = 0;
  for (const auto& [row, estimate] : estimates) {
    if (top_exact.count(row)) {
      EXPECT_NEAR(top_exact.at(row), exact.at(row), 1e-5) << row;
      EXPECT_EQ(top_estimates.at(row), estimate) << row;
      smallest_top = std::min(smallest_top, std::abs(estimate));
    } else {
      largest_rest = std::max(largest_rest, std::abs(estimate));
    }
  }
  EXPECT_GE(smallest_top, largest_rest) << "the top sites are those the estimates rank highest";
  double correlation = 0;
  file.openAttribute("correlation").read(H5::PredType::NATIVE_DOUBLE, &correlation);
  const std::string printed = "over these 3 sites: ";
  const size_t at = attribution.out.find(printed);
  ASSERT_NE(at, std::string::npos) << attribution.out;
  EXPECT_NEAR(std::stod(attribution.out.substr(at + printed.size())), correlation, 5e-4);
  EXPECT_TRUE(correlation >= -1 && correlation <= 1) << correlation;
}

TEST(AttributionPatchCli, APositionWhereTheInputsAgreeIsEstimatedAtZero) {
  TempDir tmp;
  std::vector<std::string> args = patch({"--names", "blocks.0.hook_resid_pre", "--per-position",
                                         "--method", "attribution", "--out", tmp.file("a.h5")});
  const CommandResult r = run_gradlab(args);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  H5::Exception::dontPrint();
  std::vector<hsize_t> dims;
  const std::vector<double> row =
      read_values<double>(H5::H5File(tmp.file("a.h5"), H5F_ACC_RDONLY), "scores", dims);
  ASSERT_EQ(row.size(), 8u);  // T = 4 + 1 + 4 - 1
  for (size_t t = 0; t < row.size(); ++t) {
    if (t == 2) continue;
    EXPECT_EQ(row[t], 0.0) << "position " << t;
  }
  EXPECT_NE(row[2], 0.0);
  EXPECT_TRUE(contains(r.out, "exact patching of the 8 sites")) << "--top 10 of 8 sites";
}

TEST(AttributionPatchCli, RefusesAnUnknownMethodAndTopWithoutAttribution) {
  expect_usage_error(run_gradlab(patch({"--method", "gradient"})), "patch",
                     {"'gradient'", "activation", "attribution"});
  expect_usage_error(run_gradlab(patch({"--top", "3"})), "patch", {"--top", "attribution"});
  expect_usage_error(run_gradlab(patch({"--method", "activation", "--top", "3"})), "patch",
                     {"--top", "activation"});
  expect_usage_error(run_gradlab(patch({"--method", "attribution", "--top", "0"})), "patch",
                     {"--top 0"});
}

}  // namespace test_attribution_patch_cli
}  // namespace gradlab::testing
