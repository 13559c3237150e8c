// Run directories are never clobbered: `gradlab train --out DIR` refuses a directory holding a
// run unless resuming into it or given --overwrite; a resume from an older checkpoint refuses to
// overwrite what came after it; pruning never deletes another run's checkpoints; metrics.csv
// rows are only appended; temporary files of dead saves are cleaned up, live ones kept; and
// `gradlab attention --out` replaces a file only with --overwrite and a checkpoint never.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "io/atomic_file.h"
#include "tests/cli_runner.h"
#include "tests/test_helpers.h"
#include "train/checkpoint.h"
#include "train/io/run_directory.h"

namespace gradlab::train {
namespace test_run_directory {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::contains;
using testing::read_text;
using testing::run_gradlab;
using testing::TempDir;

const std::vector<std::string> kSmall = {
    "--length",     "4",  "--d-model",         "16", "--d-ff",       "32",
    "--layers",     "1",  "--batch-size",      "8",  "--eval-size",  "16",
    "--eval-every", "10", "--target-accuracy", "0",  "--save-every", "10"};

CommandResult train(const std::vector<std::string>& args) {
  std::vector<std::string> all{"train"};
  all.insert(all.end(), args.begin(), args.end());
  all.insert(all.end(), kSmall.begin(), kSmall.end());
  return run_gradlab(all);
}

// Every file of a directory and its contents.
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    files[entry.path().filename().string()] = read_text(entry.path());
  }
  return files;
}

// The steps of metrics.csv's rows, in file order; every row must have all ten fields.
std::vector<int64_t> metric_steps(const std::string& dir) {
  std::ifstream in(fs::path(dir) / "metrics.csv");
  std::string line;
  std::getline(in, line);
  EXPECT_TRUE(line.starts_with("step,")) << line;
  std::vector<int64_t> steps;
  while (std::getline(in, line)) {
    EXPECT_EQ(std::count(line.begin(), line.end(), ','), 9) << "a torn or glued row: " << line;
    steps.push_back(std::stoll(line.substr(0, line.find(','))));
  }
  return steps;
}

TEST(RunDirectory, AFreshRunRefusesADirectoryHoldingARun) {
  TempDir tmp;
  const std::string out = tmp.file("run");
  ASSERT_EQ(train({"--steps", "20", "--out", out}).exit_code, 0);
  const auto before = snapshot(out);

  const CommandResult again = train({"--steps", "20", "--out", out, "--seed", "7"});
  EXPECT_EQ(again.exit_code, 2) << again.describe();
  EXPECT_TRUE(contains(again.err, "--out " + out + " already holds a run")) << again.err;
  EXPECT_TRUE(contains(again.err, "--overwrite")) << again.err;
  EXPECT_TRUE(contains(again.err, "--resume " + out)) << again.err;
  EXPECT_EQ(snapshot(out), before) << "a refused run changes nothing";

  // Files of other programs do not make a run directory.
  const std::string other = tmp.file("other");
  fs::create_directories(other);
  std::ofstream(fs::path(other) / "notes.txt") << "mine";
  EXPECT_EQ(train({"--steps", "10", "--out", other}).exit_code, 0);
  EXPECT_EQ(read_text(fs::path(other) / "notes.txt"), "mine");
}

TEST(RunDirectory, OverwriteReplacesTheEarlierRunWhole) {
  TempDir tmp;
  const std::string out = tmp.file("run");
  ASSERT_EQ(train({"--steps", "30", "--out", out}).exit_code, 0);
  std::ofstream(fs::path(out) / "notes.txt") << "mine";
  const CommandResult r = train({"--steps", "20", "--out", out, "--overwrite"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_FALSE(fs::exists(fs::path(out) / "step-000030.h5")) << "the earlier run's checkpoint";
  EXPECT_TRUE(fs::exists(fs::path(out) / "step-000020.h5"));
  EXPECT_EQ(metric_steps(out), (std::vector<int64_t>{10, 20})) << "only the new run's rows";
  EXPECT_EQ(read_checkpoint((fs::path(out) / "best.h5").string()).train.step <= 20, true);
  EXPECT_EQ(read_text(fs::path(out) / "notes.txt"), "mine") << "only run files are replaced";
}

TEST(RunDirectory, ResumingADirectoryContinuesItsNewestCheckpoint) {
  TempDir tmp;
  const std::string out = tmp.file("run");
  ASSERT_EQ(train({"--steps", "20", "--out", out, "--keep", "1"}).exit_code, 0);
  const CommandResult r = run_gradlab({"train", "--resume", out, "--steps", "40", "--keep", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_checkpoint(out + "/step-000040.h5").train.step, 40);
  EXPECT_FALSE(fs::exists(out + "/step-000020.h5")) << "the continued run's, pruned to --keep";
  EXPECT_FALSE(fs::exists(out + "/step-000030.h5"));
  EXPECT_EQ(metric_steps(out), (std::vector<int64_t>{10, 20, 30, 40}));

  const std::string empty = tmp.file("empty");
  fs::create_directories(empty);
  const CommandResult none = run_gradlab({"train", "--resume", empty, "--steps", "40"});
  EXPECT_EQ(none.exit_code, 2) << none.describe();
  EXPECT_TRUE(contains(none.err, "no readable step-*.h5 checkpoint")) << none.err;
}

TEST(RunDirectory, ADamagedNewestCheckpointIsSkippedByResumeDirectory) {
  TempDir tmp;
  const std::string out = tmp.file("run");
  ASSERT_EQ(train({"--steps", "20", "--out", out}).exit_code, 0);
  EXPECT_EQ(newest_readable_checkpoint(out), out + "/step-000020.h5");
  fs::resize_file(out + "/step-000020.h5", 100);
  EXPECT_EQ(newest_readable_checkpoint(out), out + "/step-000010.h5");
}

TEST(RunDirectory, ResumingAnOlderCheckpointRefusesToOverwriteWhatCameAfter) {
  TempDir tmp;
  const std::string out = tmp.file("run");
  ASSERT_EQ(train({"--steps", "30", "--out", out}).exit_code, 0);
  const auto before = snapshot(out);
  const std::vector<std::string> resume{"train", "--resume", out + "/step-000010.h5", "--steps",
                                        "40"};
  const CommandResult refused = run_gradlab(resume);
  EXPECT_EQ(refused.exit_code, 2) << refused.describe();
  EXPECT_TRUE(contains(refused.err, "went on past step 10")) << refused.err;
  EXPECT_TRUE(contains(refused.err, "step-000030.h5")) << refused.err;
  EXPECT_EQ(snapshot(out), before);

  std::vector<std::string> overwrite = resume;
  overwrite.push_back("--overwrite");
  const CommandResult r = run_gradlab(overwrite);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(metric_steps(out), (std::vector<int64_t>{10, 20, 30, 40}))
      << "the rows after step 10 are the resumed run's, once";
  EXPECT_EQ(read_checkpoint(out + "/step-000040.h5").train.step, 40);
}

TEST(RunDirectory, ATornMetricsRowIsClosedBeforeTheNextOne) {
  TempDir tmp;
  const std::string out = tmp.file("run");
  ASSERT_EQ(train({"--steps", "20", "--out", out}).exit_code, 0);
  // A crash in the middle of a row: keep the step-20 row's first few characters only.
  std::string text = read_text(fs::path(out) / "metrics.csv");
  const size_t last_row = text.rfind('\n', text.size() - 2) + 1;
  ASSERT_TRUE(text.compare(last_row, 3, "20,") == 0) << text;
  text.resize(last_row + 6);
  std::ofstream(fs::path(out) / "metrics.csv", std::ios::trunc) << text;
  const CommandResult r =
      run_gradlab({"train", "--resume", out + "/step-000020.h5", "--steps", "30"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  std::ifstream in(fs::path(out) / "metrics.csv");
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[2].size(), 6u) << "the torn row stays as it was, on a line of its own";
  EXPECT_TRUE(lines[3].starts_with("30,")) << lines[3];
}

// A pid that belonged to a process that has exited.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

TEST(RunDirectory, StaleTemporaryFilesOfDeadProcessesAreRemoved) {
  TempDir tmp;
  const std::string dead = tmp.file("step-000010.h5.tmp-" + std::to_string(dead_pid()));
  const std::string live = tmp.file("best.h5.tmp-" + std::to_string(::getppid()));
  const std::string other = tmp.file("notes.tmp-draft");
  const std::string users = tmp.file("notes.txt.tmp-" + std::to_string(dead_pid()));
  for (const std::string& f : {dead, live, other, users}) std::ofstream(f) << "x";
  EXPECT_EQ(io::remove_stale_temp_files(tmp.path().string(), is_run_file),
            std::vector<std::string>{dead});
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(other));
  EXPECT_TRUE(fs::exists(users)) << "not a file gradlab writes: the user's own";

  // A run removes them from its directory at the start, and says so.
  const std::string out = tmp.file("run");
  ASSERT_EQ(train({"--steps", "10", "--out", out}).exit_code, 0);
  const std::string left = out + "/step-000020.h5.tmp-" + std::to_string(dead_pid());
  std::ofstream(left) << "x";
  const CommandResult r = run_gradlab({"train", "--resume", out, "--steps", "20"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_FALSE(fs::exists(left));
  EXPECT_TRUE(contains(r.err, "removed " + left)) << r.err;
}

TEST(RunDirectory, ReplacedFilesAreWholeOrUntouched) {
  TempDir tmp;
  const std::string path = tmp.file("config.ini");
  io::replace_file_text(path, "first\n");
  EXPECT_EQ(read_text(path), "first\n");
  EXPECT_THROW(io::replace_file(path,
                                [](const std::string& temp) {
                                  std::ofstream(temp) << "half";
                                  throw FileError("disk full");
                                }),
               FileError);
  EXPECT_EQ(read_text(path), "first\n") << "a failed replacement leaves the old file";
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 1)
      << "and no temporary file";
  EXPECT_THROW(io::replace_file_text(tmp.file("no-such-dir/config.ini"), "x"), FileError);
}

TEST(RunDirectory, AttentionOutputReplacesAFileOnlyWithOverwriteAndACheckpointNever) {
  TempDir tmp;
  const std::string out = tmp.file("run");
  ASSERT_EQ(train({"--steps", "10", "--out", out}).exit_code, 0);
  const std::string checkpoint = out + "/step-000010.h5";
  const std::string maps = tmp.file("maps.h5");
  const auto attention = [&](const std::string& to, bool overwrite) {
    std::vector<std::string> args{"attention", "--checkpoint", checkpoint, "--input",
                                  "1 2 3 4",   "--out",        to};
    if (overwrite) args.push_back("--overwrite");
    return run_gradlab(args);
  };
  ASSERT_EQ(attention(maps, false).exit_code, 0);
  const CommandResult again = attention(maps, false);
  EXPECT_EQ(again.exit_code, 2) << again.describe();
  EXPECT_TRUE(contains(again.err, "already exists; pass --overwrite")) << again.err;
  EXPECT_EQ(attention(maps, true).exit_code, 0);

  const std::string saved = read_text(checkpoint);
  for (const std::string& target : {checkpoint, out + "/best.h5"}) {
    const CommandResult r = attention(target, true);
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_TRUE(contains(r.err, "checkpoint")) << r.err;
  }
  EXPECT_EQ(read_text(checkpoint), saved);
  EXPECT_NO_THROW(read_checkpoint(out + "/best.h5"));
}

}  // namespace test_run_directory
}  // namespace gradlab::train
