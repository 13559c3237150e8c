// Crash consistency of checkpoints: training runs that save after every step are killed with
// SIGKILL at random moments, and after every kill the newest complete checkpoint must load,
// evaluate and resume. On a tiny model a step takes far less time than a save (which writes,
// fsyncs and renames a file and syncs the directory), so most kills land inside a save.
//
// A kill inside a save may leave its temporary file (<checkpoint>.tmp-<pid>, see
// docs/checkpoint-format.md) behind: that is allowed, but it must never be taken for a
// checkpoint, neither by this test's notion of "newest" (step-NNNNNN.h5 exactly) nor by gradlab
// itself (pruning, resuming). A run that is not killed leaves no temporary file.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "tests/cli_runner.h"
#include "tests/test_helpers.h"
#include "train/checkpoint.h"

namespace gradlab::train {
namespace test_fault_injection {

using testing::with;

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::contains;
using testing::run_gradlab;
using testing::RunOptions;
using testing::TempDir;

// A tiny copy-task model that saves after every step and keeps the two newest step files.
const std::vector<std::string> kTinySaving = {
    "--length",          "2", "--symbols",    "3", "--d-model",    "8",
    "--heads",           "2", "--layers",     "1", "--d-ff",       "8",
    "--batch-size",      "2", "--eval-size",  "2", "--eval-every", "3",
    "--target-accuracy", "0", "--save-every", "1", "--keep",       "2"};

// The files of a run directory, sorted into checkpoints, temporaries and the rest.
struct RunFiles {
  std::vector<std::pair<int64_t, fs::path>> steps;  // step-NNNNNN.h5, by step
  std::vector<fs::path> temporaries;                // <name>.tmp-<pid>
  std::vector<std::string> unexpected;              // anything else
  bool has_best = false;

  const fs::path* newest() const { return steps.empty() ? nullptr : &steps.back().second; }
};

RunFiles list_run(const fs::path& dir) {
  static const std::regex step_name(R"(step-(\d{6})\.h5)");
  static const std::regex temporary_name(
      R"((step-\d{6}\.h5|best\.h5|config\.ini|metrics\.csv)\.tmp-\d+)");
  RunFiles files;
  if (!fs::exists(dir)) return files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    std::smatch match;
    if (std::regex_match(name, match, step_name)) {
      files.steps.emplace_back(std::stoll(match[1].str()), entry.path());
    } else if (std::regex_match(name, temporary_name)) {
      files.temporaries.push_back(entry.path());
    } else if (name == "best.h5") {
      files.has_best = true;
    } else if (name != "config.ini" && name != "metrics.csv") {
      files.unexpected.push_back(name);
    }
  }
  std::sort(files.steps.begin(), files.steps.end());
  return files;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(FaultInjection, UninterruptedRunLeavesNoTemporaryFiles) {
  TempDir tmp;
  const fs::path run = tmp.path() / "run";
  const CommandResult r =
      run_gradlab(with({"train", "--steps", "5", "--out", run.string()}, kTinySaving));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const RunFiles files = list_run(run);
  EXPECT_TRUE(files.temporaries.empty()) << files.temporaries.front();
  EXPECT_TRUE(files.unexpected.empty()) << files.unexpected.front();
  ASSERT_EQ(files.steps.size(), 2u);  // --keep 2
  EXPECT_EQ(files.steps[0].first, 4);
  EXPECT_EQ(files.steps[1].first, 5);
  EXPECT_TRUE(files.has_best);
}

// 24 kill-and-restart cycles of one run: each cycle resumes from the newest checkpoint the
// previous cycles left (or starts afresh while there is none) and is killed after a random
// delay. After every kill: every step-*.h5 and best.h5 reads back, the newest evaluates
// (`gradlab eval` exits 0) and resumes for two more steps (`gradlab train --resume`, into a
// separate directory), and the only extra files are temporaries of killed saves.
TEST(FaultInjection, NewestCheckpointSurvivesSigkillAtRandomMoments) {
  TempDir tmp;
  const fs::path run = tmp.path() / "run";
  constexpr int kCycles = 24;

  // The delays scale with how fast this build is (sanitizers make it several times slower): a
  // short uninterrupted run measures the start-up plus a few steps and saves.
  const auto start = std::chrono::steady_clock::now();
  const CommandResult calibration = run_gradlab(
      with({"train", "--steps", "3", "--out", (tmp.path() / "calibration").string()}, kTinySaving));
  ASSERT_EQ(calibration.exit_code, 0) << calibration.describe();
  const int run_ms = std::max(20, static_cast<int>(1000 * seconds_since(start)));

  std::mt19937 rng(20240607);
  // From well before the first save to several saves into the run.
  std::uniform_int_distribution<int> delay_ms(run_ms / 3, 2 * run_ms);
  int with_checkpoint = 0, inside_a_save = 0;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    const RunFiles before = list_run(run);
    const int delay = delay_ms(rng);
    SCOPED_TRACE("cycle " + std::to_string(cycle) + ", SIGKILL after " + std::to_string(delay) +
                 " ms");
    const std::vector<std::string> args =
        before.newest() ? std::vector<std::string>{"train", "--resume", before.newest()->string(),
                                                   "--steps", "1000000"}
                        : with({"train", "--steps", "1000000", "--out", run.string()}, kTinySaving);
    RunOptions options;
    options.signal = SIGKILL;
    options.signal_after_ms = delay;
    options.timeout_ms = 60000;
    const CommandResult killed = run_gradlab(args, options);
    ASSERT_TRUE(killed.signal_sent) << killed.describe();
    ASSERT_EQ(killed.term_signal, SIGKILL) << killed.describe();

    const RunFiles files = list_run(run);
    EXPECT_TRUE(files.unexpected.empty()) << files.unexpected.front();
    if (files.temporaries.size() > before.temporaries.size()) ++inside_a_save;
    for (const fs::path& temporary : files.temporaries) {
      EXPECT_FALSE(temporary.string().ends_with(".h5")) << temporary;
    }
    if (!files.newest()) continue;  // killed before the first save completed
    ++with_checkpoint;

    // Every complete file reads back whole.
    for (const auto& [step, path] : files.steps) {
      try {
        EXPECT_EQ(read_checkpoint(path.string()).train.step, step) << path;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "a complete checkpoint does not load: " << e.what();
      }
    }
    if (files.has_best) {
      EXPECT_NO_THROW(read_checkpoint((run / "best.h5").string()));
    }

    const std::string newest = files.newest()->string();
    const int64_t step = files.steps.back().first;
    const CommandResult eval = run_gradlab({"eval", "--checkpoint", newest});
    ASSERT_EQ(eval.exit_code, 0) << eval.describe();
    EXPECT_TRUE(contains(eval.out, "step " + std::to_string(step))) << eval.out;

    const fs::path verify = tmp.path() / ("verify-" + std::to_string(cycle));
    const CommandResult resumed = run_gradlab({"train", "--resume", newest, "--steps",
                                               std::to_string(step + 2), "--out", verify.string()});
    ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
    const RunFiles verified = list_run(verify);
    ASSERT_TRUE(verified.newest()) << resumed.describe();
    EXPECT_EQ(verified.steps.back().first, step + 2);
    EXPECT_TRUE(verified.temporaries.empty());
    fs::remove_all(verify);
  }
  std::printf(
      "[ fault    ] %d cycles, calibration run %d ms: %d with a checkpoint to check, %d "
      "killed inside a save (temporary file left)\n",
      kCycles, run_ms, with_checkpoint, inside_a_save);
  // The delays reach well past the first saves, so most cycles have a checkpoint to check.
  EXPECT_GE(with_checkpoint, kCycles / 2);
}

}  // namespace test_fault_injection
}  // namespace gradlab::train
