// `gradlab eval` states the size of the held-out set it evaluated, for every task of the table
// (data/tasks.h): a modular checkpoint used to announce --eval-size's 512 held-out sequences
// while it scored every pair it was not trained on.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <string>

#include "cli/command_table.h"
#include "data/tasks.h"
#include "tests/cli_runner.h"
#include "train/checkpoint.h"
#include "train/trained_model.h"
#include "train/trainer.h"
#include "train/training_run.h"

namespace gradlab::train {
namespace test_eval_counts {

using testing::TempDir;

// A checkpoint of an untrained one-layer model of the task `kind`, small sizes for every
// task's options, --eval-size 7 (which a task may ignore).
std::string checkpoint_of(const std::string& kind, const TempDir& dir) {
  RunConfig config;
  config.task.name = kind;
  config.task.sequence = {.length = 3, .num_symbols = 6};
  config.task.modular.modulus = 13;
  config.task.mqar.pairs = 2;
  config.task.text.context = 8;
  config.task.text.eval_iters = 5;
  config.task.text.data = dir.file("text.txt");
  config.net.d_model = 8;
  config.net.attention.num_heads = 2;
  config.net.num_layers = 1;
  config.net.feed_forward.d_ff = 8;
  config.eval_size = 7;
  // A task of feature vectors, not tokens, is read by the toy model of superposition.
  if (!data::make_task(config.task)->predicts_tokens()) config.model = "tms";
  const auto task = prepare_run(config);
  const Trainer trainer(config, task);
  const std::string path = dir.file(kind + ".h5");
  save_checkpoint(path, trainer.checkpoint());
  return path;
}

TEST(EvalCounts, TheBannerStatesTheHeldOutRowsEvaluatedForEveryTask) {
  TempDir dir;
  {
    std::ofstream text(dir.file("text.txt"));
    for (int i = 0; i < 40; ++i) text << "the cat sat on the mat.\n";
  }
  const cli::Command* const eval = cli::find_command("eval");
  ASSERT_NE(eval, nullptr);
  const std::regex stated(R"(, (\d+) (held-out sequences|windows)\)\n)");
  for (const data::TaskKind& kind : data::task_kinds()) {
    if (kind.own_data) continue;  // no held-out set: eval refuses it
    SCOPED_TRACE(kind.name);
    const std::string path = checkpoint_of(kind.name, dir);
    ::testing::internal::CaptureStdout();
    const int code = eval->run({"--checkpoint", path});
    std::fflush(stdout);
    const std::string out = ::testing::internal::GetCapturedStdout();
    ASSERT_EQ(code, 0) << out;
    std::smatch count;
    ASSERT_TRUE(std::regex_search(out, count, stated)) << out;
    const TrainedModel trained = load_trained_model(path);
    const int64_t evaluated = nn::rows_in(scoring_trainer(trained)->heldout());
    EXPECT_EQ(std::stoll(count[1]), evaluated) << out;
    // What the task says its held-out set holds, --eval-size or not.
    const data::HeldoutSize size =
        trained.task->heldout_size(trained.config.eval_size, trained.config.net.max_len);
    EXPECT_EQ(std::stoll(count[1]), size.rows) << out;
  }
}

}  // namespace test_eval_counts
}  // namespace gradlab::train
