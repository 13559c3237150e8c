// `gradlab train --task induction` from the command line: bad values of its flags are usage
// errors naming the flag, metrics.csv and the progress line carry the two copies' losses (only
// for this task), and predict, attention and ablate read its checkpoints: a first copy of any
// length up to N as the prompt, the copies' losses in ablate's tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli_runner.h"
#include "tests/test_helpers.h"

namespace gradlab::train {
namespace induction_cli {

using testing::contains;
using testing::expect_usage_error;
using testing::read_text;
using testing::run_gradlab;
using testing::TempDir;

// The smallest induction run, blocks of 3 to 6 symbols out of 20; `extra` flags are appended.
std::vector<std::string> induction_run(const std::string& out,
                                       const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {
      "train", "--task",      "induction", "--d-model",    "16", "--heads", "2", "--d-ff",
      "0",     "--layers",    "2",         "--batch-size", "4",  "--steps", "4", "--eval-every",
      "2",     "--eval-size", "8",         "--out",        out};
  args.insert(args.end(), extra.begin(), extra.end());
  if (std::find(extra.begin(), extra.end(), "--length") == extra.end()) {
    args.insert(args.end(), {"--length", "6"});
  }
  if (std::find(extra.begin(), extra.end(), "--symbols") == extra.end()) {
    args.insert(args.end(), {"--symbols", "20"});
  }
  return args;
}

TEST(InductionCli, BadValuesAreUsageErrorsNamingTheFlags) {
  TempDir dir;
  const std::string never = dir.file("never");
  expect_usage_error(run_gradlab(induction_run(never, {"--length", "1"})), "train", {"--length"});
  expect_usage_error(run_gradlab(induction_run(never, {"--length", "six"})), "train", {"--length"});
  expect_usage_error(run_gradlab(induction_run(never, {"--symbols", "0"})), "train", {"--symbols"});
  expect_usage_error(run_gradlab(induction_run(never, {"--length", "8", "--symbols", "5"})),
                     "train", {"--symbols 5", "--length 8"});
  expect_usage_error(run_gradlab(induction_run(never, {"--model", "seq2seq"})), "train",
                     {"--model"});
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(InductionCli, MetricsCarryBothCopiesLosses) {
  TempDir dir;
  const std::string out = dir.file("run");
  auto r = run_gradlab(induction_run(out));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "first_copy loss ")) << r.out;
  EXPECT_TRUE(contains(r.out, "second_copy loss ")) << r.out;
  const auto rows = lines_of(read_text(out + "/metrics.csv"));
  ASSERT_EQ(rows.size(), 3u);  // header, steps 2 and 4
  EXPECT_TRUE(rows[0].ends_with(",eval_bits_per_token,first_copy_loss,second_copy_loss"));
  for (size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(std::count(rows[i].begin(), rows[i].end(), ','), 11) << rows[i];
    EXPECT_FALSE(rows[i].ends_with(",")) << rows[i];
  }
  const std::string checkpoint = out + "/step-000004.h5";
  const auto eval = run_gradlab({"eval", "--checkpoint", checkpoint});
  ASSERT_EQ(eval.exit_code, 0) << eval.describe();
  EXPECT_TRUE(contains(eval.out, "\nsecond_copy loss ")) << eval.out;

  const auto ablate = run_gradlab({"ablate", "--checkpoint", checkpoint});
  ASSERT_EQ(ablate.exit_code, 0) << ablate.describe();
  EXPECT_TRUE(contains(ablate.out, "held-out second_copy loss with one part knocked out"))
      << ablate.out;
}

TEST(InductionCli, PromptIsAFirstCopyOfUpToNSymbols) {
  TempDir dir;
  const std::string out = dir.file("run");
  ASSERT_EQ(run_gradlab(induction_run(out)).exit_code, 0);
  const std::string checkpoint = out + "/step-000004.h5";
  for (const std::string input : {"3 1 4", "3 1 4 15 9 2"}) {
    const auto r = run_gradlab({"predict", "--checkpoint", checkpoint, "--input", input});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_TRUE(contains(r.out, "input    0 " + input + "\n")) << r.out;
    EXPECT_TRUE(contains(r.out, "expected " + input + "\n")) << r.out;
  }
  const auto maps = run_gradlab({"attention", "--checkpoint", checkpoint, "--input", "5 6 7 8",
                                 "--out", dir.file("maps.h5")});
  EXPECT_EQ(maps.exit_code, 0) << maps.describe();
  expect_usage_error(
      run_gradlab({"predict", "--checkpoint", checkpoint, "--input", "1 2 3 4 5 6 7"}), "predict",
      {"--input", "1 to 6"});
  expect_usage_error(run_gradlab({"predict", "--checkpoint", checkpoint, "--input", "1 21"}),
                     "predict", {"--input", "1..20"});
}

}  // namespace induction_cli
}  // namespace gradlab::train
