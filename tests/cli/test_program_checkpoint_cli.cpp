// The command line on checkpoints that programs wrote: inspect shows a built-in model's fields
// and parameters, predict and attention read raw token ids, eval refuses for want of the
// program's data, and a model of one's own is inspected but not rebuilt.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/cli_runner.h"
#include "tests/program_checkpoint.h"

namespace gradlab::train {
namespace test_program_checkpoint_cli {

using testing::run_gradlab;
using testing::TempDir;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ProgramCheckpointCli, ABuiltInModelIsInspectedPredictedAndMapped) {
  TempDir dir;
  const std::string path = dir.file("program.h5");
  const auto model = nn::make_sequence_model("decoder", testing::small_net("decoder"));
  testing::train_and_save(model, path);

  const auto inspect = run_gradlab({"inspect", path});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.describe();
  for (const char* field : {"task", "program", "model", "decoder", "vocab-size", "max-len",
                            "d-model", "heads", "init", "head.weight", "total parameters"}) {
    EXPECT_TRUE(contains(inspect.out, field)) << field << "\n" << inspect.out;
  }

  const auto predict = run_gradlab({"predict", "--checkpoint", path, "--input", "1 2 3 0"});
  ASSERT_EQ(predict.exit_code, 0) << predict.describe();
  EXPECT_TRUE(contains(predict.out, "input    1 2 3 0\n")) << predict.out;
  EXPECT_TRUE(contains(predict.out, "output   ")) << predict.out;
  EXPECT_FALSE(contains(predict.out, "expected")) << "raw ids have no known answer";
  // The 7 positions leave 3 tokens after "1 2 3 0".
  const std::string output = predict.out.substr(predict.out.find("output   ") + 9);
  EXPECT_EQ(std::count(output.begin(), output.end(), ' '), 2) << output;

  const auto bad_id = run_gradlab({"predict", "--checkpoint", path, "--input", "1 6 0"});
  EXPECT_EQ(bad_id.exit_code, 2) << bad_id.describe();
  EXPECT_TRUE(contains(bad_id.err, "--input: token 6 is not an id in [0, 6)")) << bad_id.err;
  const auto too_long =
      run_gradlab({"predict", "--checkpoint", path, "--input", "1 2 3 4 5 1 2 0"});
  EXPECT_EQ(too_long.exit_code, 2) << too_long.describe();
  EXPECT_TRUE(contains(too_long.err, "leave no position to decode")) << too_long.err;

  const std::string maps = dir.file("maps.h5");
  const auto attention =
      run_gradlab({"attention", "--checkpoint", path, "--input", "4 5 1 0", "--out", maps});
  ASSERT_EQ(attention.exit_code, 0) << attention.describe();
  EXPECT_TRUE(std::filesystem::exists(maps));

  const auto eval = run_gradlab({"eval", "--checkpoint", path});
  EXPECT_EQ(eval.exit_code, 1) << eval.describe();
  EXPECT_TRUE(contains(eval.err, "trained on a program's own data, which is not in the file"))
      << eval.err;

  const auto resume = run_gradlab({"train", "--resume", path, "--steps", "5"});
  EXPECT_EQ(resume.exit_code, 2) << resume.describe();
  EXPECT_TRUE(contains(resume.err, "a program's own data")) << resume.err;
}

TEST(ProgramCheckpointCli, TrainRefusesTheMarkerAsATask) {
  TempDir dir;
  const auto train = run_gradlab({"train", "--task", "program", "--out", dir.file("run")});
  EXPECT_EQ(train.exit_code, 2) << train.describe();
  EXPECT_TRUE(contains(train.err, "task program: a program's own data")) << train.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("run")));
}

TEST(ProgramCheckpointCli, AModelOfOnesOwnIsInspectedButNotRebuilt) {
  TempDir dir;
  const std::string path = dir.file("own.h5");
  const auto model = std::make_shared<testing::Bigram>(testing::small_net("decoder"));
  testing::train_and_save(model, path, {{"width", int64_t{8}}});

  const auto inspect = run_gradlab({"inspect", path});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.describe();
  EXPECT_TRUE(contains(inspect.out, "width")) << inspect.out;
  EXPECT_TRUE(contains(inspect.out, "embed.weight")) << inspect.out;

  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"predict", "--checkpoint", path, "--input", "1 0"},
        std::vector<std::string>{"eval", "--checkpoint", path}}) {
    const auto refused = run_gradlab(command);
    EXPECT_EQ(refused.exit_code, 1) << refused.describe();
    EXPECT_TRUE(contains(refused.err, "a program's own model, which only that program can build"))
        << refused.err;
  }
}

}  // namespace test_program_checkpoint_cli
}  // namespace gradlab::train
