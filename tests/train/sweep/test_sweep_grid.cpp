// A sweep's grid read from hostile --grid strings, its points and their names, sweep.json read
// back as written and refused when it is not one, the check of a changed sweep, and the summary
// of a metrics.csv (torn rows, a resumed run's clock).
#include <gtest/gtest.h>

#include <fstream>

#include "autograd/error.h"
#include "autograd/format.h"
#include "tests/cli_runner.h"
#include "tests/test_helpers.h"
#include "train/sweep/sweep_runs.h"

namespace gradlab::train {
namespace test_sweep_grid {

using testing::contains;

std::string refusal(const std::string& text) {
  try {
    parse_grid_axis(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(SweepGrid, ReadsAnAxisAndRefusesHostileStrings) {
  const GridAxis axis = parse_grid_axis("--lr=1e-4,3e-4,1e-3");
  EXPECT_EQ(axis.key, "lr");
  EXPECT_EQ(axis.values, (std::vector<std::string>{"1e-4", "3e-4", "1e-3"}));
  EXPECT_EQ(parse_grid_axis("data=a/b=c.txt").values, std::vector<std::string>{"a/b=c.txt"});
  const std::vector<std::pair<std::string, std::string>> hostile = {
      {"", "expected KEY=V1,V2"},
      {"lr", "expected KEY=V1,V2"},
      {"lr 1e-3", "expected KEY=V1,V2"},
      {"=1,2", "no key before '='"},
      {"--=1", "no key before '='"},
      {"lr=", "an empty value"},
      {"lr=1,", "an empty value"},
      {"lr=,1", "an empty value"},
      {"lr=1,,2", "an empty value"},
      {",=1", "is not the name of a flag"},
      {"l r=1", "is not the name of a flag"},
      {"lr\n=1", "is not the name of a flag"},
      {"lr=1,2,1", "the value '1' is given twice"},
  };
  for (const auto& [text, reason] : hostile) {
    const std::string message = refusal(text);
    EXPECT_TRUE(contains(message, reason)) << quote(text) << ": " << message;
    EXPECT_TRUE(message.starts_with("--grid '")) << message;
    EXPECT_FALSE(contains(message, "\n")) << message;
  }
}

TEST(SweepGrid, PointsAreTheCrossProductTimesSeedsNamedReadably) {
  const std::vector<GridAxis> grid = {{"lr", {"1e-3", "3e-3"}}, {"d-model", {"8", "16", "32"}}};
  const std::vector<SweepPoint> points = sweep_points(grid, 2);
  ASSERT_EQ(points.size(), 12u);
  EXPECT_EQ(points[0].name(), "lr=1e-3,d-model=8,seed=0");
  EXPECT_EQ(points[1].name(), "lr=1e-3,d-model=16,seed=0");
  EXPECT_EQ(points[5].name(), "lr=3e-3,d-model=32,seed=0");
  EXPECT_EQ(points[6].name(), "lr=1e-3,d-model=8,seed=1");
  EXPECT_EQ(sweep_points({}, 3).back().name(), "seed=2");
  // A value's path separators, spaces and '%' are escaped: one directory name, one per value.
  EXPECT_EQ(sweep_points({{"data", {"a/b c%.txt"}}}, 1)[0].name(), "data=a%2Fb%20c%25.txt,seed=0");
  const auto refused = [](const std::vector<GridAxis>& g, int64_t seeds) {
    try {
      sweep_points(g, seeds);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_TRUE(contains(refused(grid, 0), "--seeds 0: must be at least 1"));
  EXPECT_TRUE(contains(refused({{"lr", {"1"}}, {"lr", {"2"}}}, 1), "on two --grid axes"));
  EXPECT_TRUE(contains(refused({{"seed", {"1"}}}, 1), "counted by --seeds"));
}

TEST(SweepGrid, TheSweepFileReadsBackAndAChangeIsRefusedUnlessExtended) {
  testing::TempDir dir;
  SweepSpec spec{.config = "configs/a \"b\".ini",
                 .flags = {"--steps", "20", "--eval-full"},
                 .threads = 2,
                 .grid = {{"lr", {"1e-3", "3e-3"}}, {"data", {"x\\y\t.txt"}}},
                 .seeds = 2,
                 .failed = {"lr=1e-3,data=x%5Cy%09.txt,seed=1"}};
  const std::string path = dir.file("sweep.json");
  std::ofstream(path) << sweep_json(spec);
  const SweepSpec back = read_sweep_json(path);
  EXPECT_EQ(back.config, spec.config);
  EXPECT_EQ(back.flags, spec.flags);
  EXPECT_EQ(back.threads, 2);
  EXPECT_EQ(back.grid, spec.grid);
  EXPECT_EQ(back.seeds, 2);
  EXPECT_EQ(back.failed, spec.failed);

  for (const std::string& text : {std::string("{}"), std::string("not json"),
                                  sweep_json(spec).substr(0, 80), std::string("{\"format\": 1}")}) {
    std::ofstream(path) << text;
    EXPECT_THROW(read_sweep_json(path), ConfigError) << text;
  }

  const auto change = [&](SweepSpec now, bool extend) {
    try {
      check_same_sweep(spec, now, extend);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  SweepSpec same = spec;
  same.threads = 1;
  same.failed.clear();
  EXPECT_EQ(change(same, false), "");
  SweepSpec more = spec;
  more.grid[0].values.push_back("1e-2");
  more.seeds = 3;
  EXPECT_TRUE(contains(change(more, false), "pass --extend")) << change(more, false);
  EXPECT_EQ(change(more, true), "");
  SweepSpec fewer = spec;
  fewer.grid[0].values.pop_back();
  EXPECT_TRUE(contains(change(fewer, true), "--extend only adds values")) << change(fewer, true);
  SweepSpec other_key = spec;
  other_key.grid[1].key = "d-model";
  EXPECT_TRUE(contains(change(other_key, true), "--extend only adds"));
  SweepSpec other_flags = spec;
  other_flags.flags = {"--steps", "30"};
  EXPECT_TRUE(contains(change(other_flags, true), "gives every run the flags '--steps 20"));
}

TEST(SweepGrid, AMetricsFileIsSummarizedAcrossResumesAndTornRows) {
  testing::TempDir dir;
  const std::string path = dir.file("metrics.csv");
  EXPECT_FALSE(summarize_metrics(path));
  std::ofstream(path) << "step,train_loss,eval_loss,token_accuracy,exact_match,grad_norm,lr,"
                         "tokens_per_second,elapsed_seconds,eval_bits_per_token\n"
                         "10,2.5,2.0,0.25,0,1,0.001,100,1.5,2.9\n"
                         "20,2.0,1.5,0.5,0.25,1,0.001,100,3,2.2\n"
                         "30,1.9,1.75,0.75,0\n"  // torn by a kill: skipped
                         "30,1.8,1.75,0.625,0.125,1,0.001,100,0.5,2.5\n";  // resumed: clock anew
  const std::optional<RunSummary> s = summarize_metrics(path);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->steps, 30);
  EXPECT_EQ(s->final_train_loss, 1.8);
  EXPECT_EQ(s->final_eval_loss, 1.75);
  EXPECT_EQ(s->best_eval_loss, 1.5);
  EXPECT_EQ(s->final_token_accuracy, 0.625);
  EXPECT_EQ(s->best_token_accuracy, 0.625);
  EXPECT_EQ(s->final_exact_match, 0.125);
  EXPECT_EQ(s->best_exact_match, 0.25);
  EXPECT_EQ(s->wall_seconds, 3.5);
}

}  // namespace test_sweep_grid
}  // namespace gradlab::train
