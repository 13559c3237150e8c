// claim_run_directory and prepare_run_directory, the library's half of `gradlab train --out`:
// a directory holding a run is refused unless resumed into or overwritten, --overwrite replaces
// only the run's own files, a resume from behind the run's newest checkpoint is refused unless
// --overwrite, and the temporary files of dead saves are removed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "tests/cli_runner.h"
#include "train/io/run_directory_claim.h"

namespace gradlab::train {
namespace run_directory_claim_test {

namespace fs = std::filesystem;
using testing::read_text;
using testing::TempDir;

void write(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

// A run directory as a run that saved steps 10 and 20 leaves it (the files' contents do not
// matter to the claim), with metrics rows up to step 25 and a file of the user's own.
std::string make_run(const TempDir& tmp) {
  const fs::path dir = tmp.path() / "run";
  fs::create_directories(dir);
  write(dir / "config.ini", "steps = 30\n");
  write(dir / "metrics.csv", "step,train_loss\n10,1.5\n20,1.2\n25,1.1\n");
  write(dir / "step-000010.h5", "10");
  write(dir / "step-000020.h5", "20");
  write(dir / "best.h5", "best");
  write(dir / "notes.txt", "the user's own");
  return dir.string();
}

// A run into dir, resuming from `resume` at `step` when given.
RunDirectory run_into(const std::string& dir, const std::string& resume = "",
                      std::optional<int64_t> step = std::nullopt, bool overwrite = false) {
  RunDirectory run;
  run.dir = dir;
  run.resume = resume;
  run.resumed_step = step;
  run.overwrite = overwrite;
  return run;
}

// The ConfigError message claim_run_directory throws for run ("" if it does not throw).
std::string refusal(const RunDirectory& run) {
  try {
    claim_run_directory(run);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(RunDirectoryClaim, ANewOrEmptyDirectoryIsFree) {
  TempDir tmp;
  fs::create_directories(tmp.path() / "empty");
  write(tmp.path() / "empty" / "notes.txt", "not a run's file");
  for (const std::string& dir : {tmp.file("new"), tmp.file("empty")}) {
    const RunDirectoryClaim claim = claim_run_directory(run_into(dir));
    EXPECT_TRUE(claim.replaced.empty()) << dir;
    EXPECT_TRUE(claim.earlier_checkpoints.empty()) << dir;
    EXPECT_EQ(claim.metrics_after, -1) << dir;
  }
}

TEST(RunDirectoryClaim, RefusesADirectoryHoldingARunNamingTheWaysOut) {
  TempDir tmp;
  const std::string dir = make_run(tmp);
  const std::string message = refusal(run_into(dir));
  EXPECT_EQ(message, "--out " + dir +
                         " already holds a run (best.h5, config.ini, metrics.csv and 2 step "
                         "checkpoints); resume it with --resume " +
                         dir + ", choose another --out, or pass --overwrite to replace it");
  // A resume from elsewhere into a directory holding a run is refused alike.
  EXPECT_NE(
      refusal(run_into(dir, tmp.file("other/step-000010.h5"), 10)).find("already holds a run"),
      std::string::npos);
}

TEST(RunDirectoryClaim, OverwriteReplacesOnlyTheRunsOwnFiles) {
  TempDir tmp;
  const std::string dir = make_run(tmp);
  const RunDirectoryClaim claim = claim_run_directory(run_into(dir, "", std::nullopt, true));
  EXPECT_EQ(claim.replaced.size(), 5u);
  // The claim changes nothing on disk; preparing the directory does.
  EXPECT_TRUE(fs::exists(fs::path(dir) / "step-000020.h5"));
  prepare_run_directory(dir, claim);
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(dir)) {
    left.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(left, std::vector<std::string>{"notes.txt"});
  EXPECT_EQ(read_text(fs::path(dir) / "notes.txt"), "the user's own");
}

TEST(RunDirectoryClaim, AResumeFromTheNewestCheckpointContinuesTheRun) {
  TempDir tmp;
  const std::string dir = make_run(tmp);
  const std::string from = (fs::path(dir) / "step-000020.h5").string();
  const RunDirectoryClaim claim = claim_run_directory(run_into(dir, from, 20));
  EXPECT_EQ(claim.earlier_checkpoints,
            (std::vector<std::string>{(fs::path(dir) / "step-000010.h5").string(), from}));
  EXPECT_TRUE(claim.replaced.empty());
  // The row of step 25 came after the resumed step without a checkpoint: it is written again.
  EXPECT_EQ(claim.metrics_after, 20);
  prepare_run_directory(dir, claim);
  EXPECT_EQ(read_text(fs::path(dir) / "metrics.csv"), "step,train_loss\n10,1.5\n20,1.2\n");
  EXPECT_TRUE(fs::exists(from));
}

TEST(RunDirectoryClaim, AResumePastWhichTheRunWentOnIsRefusedUnlessOverwrite) {
  TempDir tmp;
  const std::string dir = make_run(tmp);
  const std::string from = (fs::path(dir) / "step-000010.h5").string();
  const std::string newest = (fs::path(dir) / "step-000020.h5").string();
  EXPECT_EQ(refusal(run_into(dir, from, 10)),
            "--resume " + from + ": the run in " + dir +
                " went on past step 10 (1 step checkpoint, the newest " + newest +
                "); resume the newest with --resume " + dir +
                ", choose another --out, or pass --overwrite to drop what came after step 10");
  const RunDirectoryClaim claim = claim_run_directory(run_into(dir, from, 10, true));
  EXPECT_EQ(claim.replaced, std::vector<std::string>{newest});
  EXPECT_EQ(claim.earlier_checkpoints, std::vector<std::string>{from});
  prepare_run_directory(dir, claim);
  EXPECT_FALSE(fs::exists(newest));
  EXPECT_TRUE(fs::exists(from));
  EXPECT_TRUE(fs::exists(fs::path(dir) / "best.h5"));
  EXPECT_EQ(read_text(fs::path(dir) / "metrics.csv"), "step,train_loss\n10,1.5\n");
}

TEST(RunDirectoryClaim, PreparingRemovesTheTemporaryFilesOfDeadSaves) {
  TempDir tmp;
  const std::string dir = tmp.file("run");
  fs::create_directories(dir);
  // No process has pid 2^22 + 1: Linux gives out pids below 2^22.
  const std::string dead = (fs::path(dir) / "step-000010.h5.tmp-4194305").string();
  const std::string users = (fs::path(dir) / "notes.txt.tmp-4194305").string();
  write(dead, "half a checkpoint");
  write(users, "the user's own");
  const std::vector<std::string> removed =
      prepare_run_directory(dir, claim_run_directory(run_into(dir)));
  EXPECT_EQ(removed, std::vector<std::string>{dead});
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(users));
}

}  // namespace run_directory_claim_test
}  // namespace gradlab::train
