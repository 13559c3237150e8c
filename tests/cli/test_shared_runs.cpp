// shared_run (tests/cli_runner.h): a training command line trained once per build of gradlab,
// every later call reading the same run.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/cli_runner.h"

namespace gradlab::testing {
namespace test_shared_runs {

namespace fs = std::filesystem;

const std::vector<std::string> kTwoSteps = {
    "train", "--length",     "3", "--d-model",         "8", "--heads",  "2", "--d-ff",
    "8",     "--steps",      "2", "--eval-every",      "1", "--layers", "1", "--eval-size",
    "4",     "--batch-size", "2", "--target-accuracy", "0"};

TEST(SharedRuns, ACommandLineIsTrainedOnceAndEveryLaterCallReadsThatRun) {
  const SharedRun first = shared_run(kTwoSteps);
  const fs::path checkpoint = first.dir / "best.h5";
  ASSERT_TRUE(fs::exists(checkpoint)) << first.out;
  EXPECT_NE(first.out.find("Checkpoint: "), std::string::npos) << first.out;
  const auto written = fs::last_write_time(checkpoint);

  const SharedRun again = shared_run(kTwoSteps);
  EXPECT_EQ(again.dir, first.dir);
  EXPECT_EQ(again.out, first.out);
  EXPECT_EQ(fs::last_write_time(checkpoint), written) << "trained again";

  std::vector<std::string> other = kTwoSteps;
  other.back() = "1";  // another --target-accuracy: another run
  EXPECT_NE(shared_run(other).dir, first.dir);
}

TEST(SharedRuns, AFileIsWrittenOnceUnderANameThatFollowsItsText) {
  const std::string path = shared_file("shared-runs-test.txt", "one text\n");
  EXPECT_EQ(read_text(path), "one text\n");
  EXPECT_EQ(shared_file("shared-runs-test.txt", "one text\n"), path);
  const std::string other = shared_file("shared-runs-test.txt", "another text\n");
  EXPECT_NE(other, path);
  EXPECT_EQ(read_text(other), "another text\n");
}

}  // namespace test_shared_runs
}  // namespace gradlab::testing
