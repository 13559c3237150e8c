// `gradlab train --task modular` from the command line: every bad value of its flags is a usage
// error naming the flag, --batch-size 0 is refused for a task without a finite training set,
// metrics.csv and the summary carry the training set's scores (only for this task), and a run
// resumed from its checkpoint ends bit-identical to an uninterrupted one.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli_runner.h"
#include "tests/test_helpers.h"
#include "train/checkpoint.h"

namespace gradlab::train {
namespace modular_cli {

using testing::contains;
using testing::expect_usage_error;
using testing::kTiny;
using testing::read_text;
using testing::run_gradlab;
using testing::TempDir;
using testing::with;

// A 1-layer model on the products modulo 5, full batch; `changed` replaces the value of a flag
// (flags may be given once only) or adds it.
std::vector<std::string> modular_args(std::vector<std::string> head,
                                      const std::vector<std::string>& changed = {}) {
  std::vector<std::string> args = {
      "--task",       "modular", "--modulus",         "5",  "--train-fraction", "0.5",
      "--operation",  "mul",     "--d-model",         "16", "--heads",          "2",
      "--d-ff",       "16",      "--layers",          "1",  "--batch-size",     "0",
      "--eval-every", "5",       "--target-accuracy", "0"};
  for (size_t i = 0; i + 1 < changed.size(); i += 2) {
    const auto it = std::find(args.begin(), args.end(), changed[i]);
    if (it != args.end()) {
      *(it + 1) = changed[i + 1];
    } else {
      args.insert(args.end(), {changed[i], changed[i + 1]});
    }
  }
  head.insert(head.end(), args.begin(), args.end());
  return head;
}

TEST(ModularCli, BadValuesAreUsageErrorsNamingTheFlag) {
  TempDir dir;
  const std::vector<std::string> train = {"train", "--out", dir.file("run"), "--steps", "1"};
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases = {
      {{"--modulus", "1"}, {"--modulus", "[2, 4096]"}},
      {{"--modulus", "100000"}, {"--modulus", "[2, 4096]"}},
      {{"--operation", "div"}, {"--operation", "add, sub or mul"}},
      {{"--train-fraction", "0"}, {"--train-fraction", "(0, 1)"}},
      {{"--train-fraction", "1"}, {"--train-fraction", "(0, 1)"}},
      {{"--train-fraction", "nan"}, {"--train-fraction"}},
      {{"--modulus", "2", "--train-fraction", "0.05"}, {"--train-fraction", "no training pair"}},
      {{"--batch-size", "-1"}, {"--batch-size"}},
  };
  for (const auto& [flags, named] : cases) {
    SCOPED_TRACE(flags[0] + " " + flags[1]);
    expect_usage_error(run_gradlab(modular_args(train, flags)), "train", named);
  }
  // The copy task draws fresh samples at every step: no whole training set to take.
  std::vector<std::string> copy = with({"train", "--out", dir.file("copy")}, kTiny);
  *(std::find(copy.begin(), copy.end(), "--batch-size") + 1) = "0";
  expect_usage_error(run_gradlab(copy), "train", {"--batch-size must be positive, got 0"});
}

// The header and the rows of metrics.csv.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(ModularCli, MetricsCarryTheTrainingSetOnlyForThisTask) {
  TempDir dir;
  auto r = run_gradlab(modular_args({"train", "--out", dir.file("m"), "--steps", "10"}));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "train acc ")) << r.out;
  EXPECT_TRUE(contains(r.out, "Training set: loss ")) << r.out;
  const auto rows = lines_of(read_text(dir.path() / "m" / "metrics.csv"));
  ASSERT_EQ(rows.size(), 3u);  // header, steps 5 and 10
  EXPECT_TRUE(rows[0].ends_with(",eval_bits_per_token,train_accuracy,train_eval_loss"));
  for (size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(std::count(rows[i].begin(), rows[i].end(), ','), 11) << rows[i];
    EXPECT_FALSE(rows[i].ends_with(",")) << rows[i];
  }

  r = run_gradlab(with({"train", "--out", dir.file("c")}, kTiny));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_FALSE(contains(r.out, "train acc")) << r.out;
  EXPECT_TRUE(
      lines_of(read_text(dir.path() / "c" / "metrics.csv"))[0].ends_with(",eval_bits_per_token"));
}

TEST(ModularCli, ResumeMatchesUninterruptedRun) {
  TempDir dir;
  const std::string split = dir.file("split"), straight = dir.file("straight");
  const std::vector<std::string> minibatch = {"--batch-size", "6", "--seed", "4"};
  auto r = run_gradlab(modular_args({"train", "--out", split, "--steps", "15"}, minibatch));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  r = run_gradlab({"train", "--resume", split + "/step-000015.h5", "--steps", "30"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  r = run_gradlab(modular_args({"train", "--out", straight, "--steps", "30"}, minibatch));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const CheckpointData a = read_checkpoint(split + "/step-000030.h5");
  const CheckpointData b = read_checkpoint(straight + "/step-000030.h5");
  testing::expect_identical(a.model, b.model);
  testing::expect_identical(a.optimizer_state, b.optimizer_state);
  EXPECT_EQ(a.config, b.config);
  // The rows after the resume, up to the timings, are the uninterrupted run's.
  const auto deterministic = [](const std::string& row) {
    std::string kept;
    std::istringstream fields(row);
    std::string field;
    for (int i = 0; std::getline(fields, field, ','); ++i) {
      if (i < 7 || i > 9) kept += field + ",";  // not throughput, time
    }
    return kept;
  };
  const auto resumed = lines_of(read_text(std::filesystem::path(split) / "metrics.csv"));
  const auto uninterrupted = lines_of(read_text(std::filesystem::path(straight) / "metrics.csv"));
  ASSERT_EQ(resumed.size(), uninterrupted.size());
  for (size_t i = 0; i < resumed.size(); ++i) {
    EXPECT_EQ(deterministic(resumed[i]), deterministic(uninterrupted[i]));
  }
}

}  // namespace modular_cli
}  // namespace gradlab::train
