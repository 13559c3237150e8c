// A tms run from the command line: its progress line and summary show the loss and nothing that
// counts tokens; `gradlab superposition` prints and writes (as CSV) the geometry
// data::superposition computes from its checkpoint, keeps an existing --out, and refuses a
// checkpoint of another task on one line.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "data/tms_task.h"
#include "nn/sequence_model.h"
#include "tests/cli_runner.h"
#include "tests/test_helpers.h"
#include "train/trained_model.h"

namespace gradlab::testing {
namespace test_superposition_cli {

// Three instances of four features in two dimensions, 20 steps.
const std::vector<std::string> kTms = {
    "train", "--task",  "tms", "--features",   "4",  "--instances", "3",  "--min-density",
    "0.1",   "--model", "tms", "--d-model",    "2",  "--heads",     "1",  "--batch-size",
    "16",    "--steps", "20",  "--eval-every", "10", "--eval-size", "16", "--target-exact-match",
    "0"};

std::vector<std::vector<std::string>> csv_rows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> cells;
    std::istringstream fields(line);
    for (std::string cell; std::getline(fields, cell, ',');) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

TEST(SuperpositionCli, ATmsRunShowsItsLossAndItsGeometryAndAnotherTaskIsRefused) {
  const SharedRun run = shared_run(kTms);
  EXPECT_TRUE(contains(run.out, "step 20/20  loss ")) << run.out;
  EXPECT_TRUE(contains(run.out, "  val ")) << run.out;
  EXPECT_TRUE(contains(run.out, "Trained 20 steps in ")) << run.out;
  for (const char* absent : {"acc", "exact", "tok/s"}) {
    EXPECT_FALSE(contains(run.out, absent)) << absent << " in\n" << run.out;
  }
  const std::string checkpoint = (run.dir / "step-000020.h5").string();

  TempDir dir;
  const std::string out = dir.file("geometry.csv");
  const auto r = run_gradlab({"superposition", "--checkpoint", checkpoint, "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "3 instances, 4 features in 2 dimensions")) << r.out;
  EXPECT_TRUE(contains(r.out, "instance 2, density 0.1000")) << r.out;

  const train::TrainedModel trained = train::load_trained_model(checkpoint);
  const data::Superposition s = data::superposition(*trained.model, *trained.task);
  const std::vector<double> w = s.weight.to_vector();  // [I, m, n]
  const auto rows = csv_rows(read_text(out));
  ASSERT_EQ(rows.size(), 1u + 3 * 4);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"instance", "density", "feature", "norm",
                                               "dimensionality", "angle", "w0", "w1"}));
  for (int64_t j = 0; j < 3; ++j) {
    for (int64_t i = 0; i < 4; ++i) {
      const std::vector<std::string>& row = rows[1 + j * 4 + i];
      ASSERT_EQ(row.size(), 8u);
      const int64_t at = j * 4 + i;
      EXPECT_EQ(std::stoll(row[0]), j);
      EXPECT_NEAR(std::stod(row[1]), s.densities[j], 1e-8);
      EXPECT_EQ(std::stoll(row[2]), i);
      EXPECT_NEAR(std::stod(row[3]), s.geometry.norms[at], 1e-7);
      EXPECT_NEAR(std::stod(row[4]), s.geometry.dimensionality[at], 1e-7);
      EXPECT_NEAR(std::stod(row[5]), s.geometry.angles[at], 1e-6);
      EXPECT_NEAR(std::stod(row[6]), w[(j * 2 + 0) * 4 + i], 1e-7);
      EXPECT_NEAR(std::stod(row[7]), w[(j * 2 + 1) * 4 + i], 1e-7);
    }
  }
  EXPECT_NEAR(s.densities[1], std::sqrt(0.1), 1e-12);

  const std::string written = read_text(out);
  expect_usage_error(run_gradlab({"superposition", "--checkpoint", checkpoint, "--out", out}),
                     "superposition", {out, "--overwrite"});
  EXPECT_EQ(read_text(out), written);

  const std::string copy = toy_checkpoint(kTiny, "decoder");
  expect_usage_error(run_gradlab({"superposition", "--checkpoint", copy}), "superposition",
                     {copy, "a model of task copy, not of tms"});

  // --model's help lists every kind of the model table (read with its wrapping undone).
  std::istringstream help(run_gradlab({"train", "--help"}).out);
  std::string words;
  for (std::string word; help >> word;) words += word + " ";
  for (const std::string& kind : nn::model_kinds()) {
    EXPECT_TRUE(contains(words, " " + kind + " (")) << kind << " in\n" << words;
  }
}

}  // namespace test_superposition_cli
}  // namespace gradlab::testing
