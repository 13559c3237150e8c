// `gradlab sweep`: a 2x2 grid times 2 seeds of the tiny copy model makes the run directories
// `gradlab train` makes with the same flags (the same metrics bit for bit), results.csv has a
// row for each, --jobs 1 gives what --jobs 2 gives, running the command again touches no finished
// run and resumes a half-finished one from its checkpoint, and bad grids are usage errors
// refused before anything runs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "tests/cli_runner.h"
#include "tests/test_helpers.h"

namespace gradlab::cli {
namespace test_sweep_cli {

namespace fs = std::filesystem;
using testing::contains;
using testing::read_text;
using testing::run_gradlab;
using testing::TempDir;
using testing::with;

// kTiny without --d-model (a grid key here), 3 steps, saving every step so that a run can be cut
// short.
std::vector<std::string> tiny_flags() {
  std::vector<std::string> flags;
  for (size_t i = 0; i < testing::kTiny.size(); i += 2) {
    if (testing::kTiny[i] == "--d-model" || testing::kTiny[i] == "--steps") continue;
    flags.insert(flags.end(), {testing::kTiny[i], testing::kTiny[i + 1]});
  }
  return with(flags, {"--steps", "3", "--save-every", "1", "--keep", "5"});
}

std::vector<std::string> sweep_args(const std::string& out, const std::string& jobs,
                                    const std::string& seeds) {
  return with(with({"sweep", "--grid", "lr=1e-3,3e-3", "--grid", "d-model=8,16"}, tiny_flags()),
              {"--seeds", seeds, "--jobs", jobs, "--out", out});
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  for (size_t start = 0; start < text.size();) {
    const size_t end = text.find('\n', start);
    out.push_back(text.substr(start, end - start));
    start = end == std::string::npos ? text.size() : end + 1;
  }
  return out;
}

// metrics.csv without its timing columns (tokens_per_second, elapsed_seconds).
std::string metrics_without_timing(const fs::path& run) {
  std::string out;
  for (const std::string& line : lines(read_text(run / "metrics.csv"))) {
    size_t cut = 0;
    for (int comma = 0; comma < 7; ++comma) cut = line.find(',', cut) + 1;
    out += line.substr(0, cut) + '\n';
  }
  return out;
}

// results.csv without its wall_seconds column (the last).
std::string results_without_time(const fs::path& sweep) {
  std::string out;
  for (const std::string& line : lines(read_text(sweep / "results.csv"))) {
    out += line.substr(0, line.rfind(',')) + '\n';
  }
  return out;
}

// Every file of the sweep's run directories and its modification time.
std::map<std::string, fs::file_time_type> run_files(const fs::path& sweep) {
  std::map<std::string, fs::file_time_type> files;
  for (const auto& entry : fs::recursive_directory_iterator(sweep)) {
    if (entry.is_regular_file() && entry.path().parent_path() != sweep) {
      files[entry.path().string()] = entry.last_write_time();
    }
  }
  return files;
}

TEST(SweepCli, MakesTheRunsOfTrainInParallelAndResumes) {
  TempDir dir;
  const fs::path sweep = dir.path() / "sweep";
  const auto made = run_gradlab(sweep_args(sweep.string(), "2", "2"));
  ASSERT_EQ(made.exit_code, 0) << made.describe();
  EXPECT_TRUE(contains(made.out, "8 runs, 0 finished before, 8 to run, 2 at once")) << made.out;

  const std::vector<std::string> rows = lines(read_text(sweep / "results.csv"));
  ASSERT_EQ(rows.size(), 9u) << read_text(sweep / "results.csv");
  EXPECT_TRUE(rows[0].starts_with("name,lr,d-model,seed,status,steps,final_train_loss,"));
  EXPECT_EQ(rows[1].substr(0, rows[1].find(",finished,3,")),
            "\"lr=1e-3,d-model=8,seed=0\",1e-3,8,0");
  EXPECT_TRUE(rows[8].starts_with("\"lr=3e-3,d-model=16,seed=1\",3e-3,16,1,finished,3,"));
  for (const std::string& row : rows) EXPECT_FALSE(contains(row, ",,")) << row;
  EXPECT_TRUE(contains(read_text(sweep / "sweep.json"), "{\"key\": \"d-model\", \"values\""));

  // The run `gradlab train` makes with the same flags, bit for bit.
  const std::string point = "lr=3e-3,d-model=16,seed=1";
  const auto single =
      run_gradlab(with(with({"train", "--lr", "3e-3", "--d-model", "16"}, tiny_flags()),
                       {"--seed", "1", "--out", dir.file("single")}));
  ASSERT_EQ(single.exit_code, 0) << single.describe();
  EXPECT_EQ(metrics_without_timing(sweep / point), metrics_without_timing(dir.path() / "single"));
  const std::string last = lines(read_text(dir.path() / "single" / "metrics.csv")).back();
  const std::string final_train_loss = last.substr(2, last.find(',', 2) - 2);  // "3,<loss>,..."
  EXPECT_TRUE(contains(rows[8], ",finished,3," + final_train_loss + ",")) << rows[8] << last;

  // One job at a time gives the same runs (seed 0's rows).
  const fs::path serial = dir.path() / "serial";
  const auto one = run_gradlab(sweep_args(serial.string(), "1", "1"));
  ASSERT_EQ(one.exit_code, 0) << one.describe();
  std::string seed0;
  for (const std::string& line : lines(results_without_time(sweep))) {
    if (!contains(line, "seed=1")) seed0 += line + '\n';
  }
  EXPECT_EQ(results_without_time(serial), seed0);

  // Run again: nothing finished is redone; a run cut short after step 2 resumes from there.
  const fs::path cut = sweep / "lr=1e-3,d-model=16,seed=0";
  const std::string cut_metrics = metrics_without_timing(cut);
  fs::remove(cut / "step-000003.h5");
  std::map<std::string, fs::file_time_type> before = run_files(sweep);
  const auto again = run_gradlab(sweep_args(sweep.string(), "2", "2"));
  ASSERT_EQ(again.exit_code, 0) << again.describe();
  EXPECT_TRUE(contains(again.out, "8 runs, 7 finished before, 1 to run")) << again.out;
  EXPECT_TRUE(contains(read_text(cut / "train.log"), "Trained 1 steps"))
      << read_text(cut / "train.log");
  EXPECT_EQ(metrics_without_timing(cut), cut_metrics);
  EXPECT_EQ(results_without_time(sweep), [&] {
    std::string all;
    for (const std::string& row : rows) all += row.substr(0, row.rfind(',')) + '\n';
    return all;
  }());
  for (const auto& [file, time] : run_files(sweep)) {
    if (fs::path(file).parent_path() == cut) continue;
    ASSERT_TRUE(before.count(file)) << file << " is new";
    EXPECT_EQ(time, before[file]) << file << " was touched";
  }

  // A changed grid over the same directory is refused, before anything runs.
  const std::map<std::string, fs::file_time_type> resumed = run_files(sweep);
  const auto changed =
      run_gradlab(with(with({"sweep", "--grid", "lr=1e-3", "--grid", "d-model=8,16"}, tiny_flags()),
                       {"--seeds", "2", "--out", sweep.string()}));
  testing::expect_usage_error(changed, "sweep", {"--grid lr=1e-3 d-model=8,16", "--extend"});
  EXPECT_EQ(run_files(sweep), resumed);
}

TEST(SweepCli, BadGridsAndFlagsAreUsageErrorsBeforeAnythingRuns) {
  TempDir dir;
  const std::string out = dir.file("sweep");
  const std::vector<std::pair<std::vector<std::string>, testing::Named>> cases = {
      {{"--grid", "no-such-flag=1,2"}, {"'no-such-flag' is not a flag of gradlab train"}},
      {{"--grid", "lr"}, {"--grid 'lr'", "expected KEY=V1,V2"}},
      {{"--grid", "lr=1e-3,"}, {"an empty value"}},
      {{"--grid", "lr=1e-3,1e-3"}, {"given twice"}},
      {{"--grid", "lr=1e-3", "--grid", "lr=3e-3"}, {"on two --grid axes"}},
      {{"--grid", "lr=1e-3", "--lr", "3e-3"}, {"--lr is given as a flag too"}},
      {{"--grid", "seed=1,2"}, {"--seeds"}},
      {{"--grid", "out=a,b"}, {"--out is the sweep's own flag"}},
      {{"--seed", "3"}, {"--seed", "--seeds"}},
      {{"--grid", "lr=1e-3,abc"}, {"run lr=abc,seed=0", "--lr"}},
      {{"--grid", "d-model=8,7"}, {"run d-model=7,seed=0", "--heads"}},
      {{"--jobs", "0"}, {"--jobs 0"}},
      {{"--seeds", "0"}, {"--seeds 0"}},
      {{"--grid", "warmup=1,2,3,4,5,6,7,8,9,10", "--grid", "momentum=1,2,3,4,5,6,7,8,9,10",
        "--seeds", "101"},
       {"10100 runs"}},
  };
  for (const auto& [args, named] : cases) {
    const auto r = run_gradlab(with(with({"sweep", "--out", out}, tiny_flags()), args));
    testing::expect_usage_error(r, "sweep", named);
    EXPECT_FALSE(fs::exists(out)) << "something ran for " << args.front() << " " << args.back();
  }
  fs::create_directories(dir.path() / "mine");
  std::ofstream(dir.path() / "mine" / "notes.txt") << "a user's file\n";
  testing::expect_usage_error(run_gradlab(with({"sweep", "--out", dir.file("mine")}, tiny_flags())),
                              "sweep", {"holds no sweep"});
  EXPECT_EQ(read_text(dir.path() / "mine" / "notes.txt"), "a user's file\n");
}

}  // namespace test_sweep_cli
}  // namespace gradlab::cli
