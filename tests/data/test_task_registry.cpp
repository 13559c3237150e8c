// The table of tasks: every row builds its task, names come from the table in errors and help,
// a task's checkpoints and config files hold its own options only, and the exact-match
// target's old name still works as a flag, a /config key and a config-file key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <string>

#include "autograd/error.h"
#include "data/modular_task.h"
#include "data/sequence_task.h"
#include "data/tasks.h"
#include "tests/cli_runner.h"
#include "tests/test_helpers.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/trainer.h"
#include "train/training_run.h"

namespace gradlab::data {
namespace task_registry {

using testing::contains;
using testing::run_gradlab;
using testing::TempDir;

const std::vector<std::string> kTextKeys = {"data",       "tokenizer", "context",   "val-fraction",
                                            "eval-iters", "eval-full", "vocabulary"};

// A run a little larger than testing::kTiny: a 16-wide model on 3 tokens of 4 symbols.
const std::vector<std::string> kSmallRun = {
    "--length", "3", "--symbols",    "4", "--d-model",   "16", "--heads", "2", "--d-ff",       "16",
    "--layers", "1", "--batch-size", "4", "--eval-size", "4",  "--steps", "2", "--eval-every", "1"};

std::vector<std::string> train_args(const std::string& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"train"};
  args.insert(args.end(), kSmallRun.begin(), kSmallRun.end());
  args.insert(args.end(), extra.begin(), extra.end());
  args.insert(args.end(), {"--out", out});
  return args;
}

TEST(TaskRegistry, EveryRowBuildsItsTask) {
  ASSERT_FALSE(task_kinds().empty());
  for (const TaskKind& kind : task_kinds()) {
    SCOPED_TRACE(kind.name);
    TaskConfig config;
    config.name = kind.name;
    config.text.data = "unread.txt";  // the text task reads its file only in prepare()
    config.program = {.vocab_size = 5, .positions = 7};  // the sizes a program's own data records
    config.mqar.pairs = 2;  // mqar's pairs within the default --symbols 10
    const std::shared_ptr<Task> task = kind.make(config);
    EXPECT_EQ(task->name(), kind.name);
    EXPECT_FALSE(kind.fields(config).empty());
    if (kind.own_data) {
      // A marker with no data: neither prompts nor text, and not a task gradlab train runs.
      EXPECT_EQ(task->sequence_task(), nullptr);
      EXPECT_EQ(task->language_model(), nullptr);
      EXPECT_EQ(task->vocab_size(), 5);
      EXPECT_EQ(task->positions("decoder"), 7);
      EXPECT_FALSE(contains(task_names(), kind.name));
      EXPECT_EQ(&own_data_kind(), &kind);
      continue;
    }
    // Prompts to answer, text to model, or (mqar) answers inside the sequence: never two.
    EXPECT_FALSE(task->sequence_task() && task->language_model());
    EXPECT_TRUE(contains(task_names(), kind.name));
  }
}

// The public call a program makes, on the temporary that a row's make returns: a data source
// keeps its task alive (it used to end in std::terminate, the task held by no shared_ptr).
TEST(TaskRegistry, EveryRowsTaskMakesItsDataSourceFromAProgram) {
  TempDir dir;
  {
    std::ofstream text(dir.file("text.txt"));
    for (int i = 0; i < 40; ++i) text << "the cat sat on the mat.\n";
  }
  for (const TaskKind& kind : task_kinds()) {
    if (kind.own_data) continue;  // no data to make: its data_source refuses (ConfigError)
    SCOPED_TRACE(kind.name);
    train::RunConfig config;
    config.task.name = kind.name;
    config.task.text.data = dir.file("text.txt");
    config.task.text.context = 8;
    config.task.mqar.pairs = 2;
    config.net.d_model = 8;
    config.net.attention.num_heads = 2;
    config.net.feed_forward.d_ff = 8;
    config.eval_size = 3;
    // A task of feature vectors, not tokens, is read by the toy model of superposition.
    if (!make_task(config.task)->predicts_tokens()) config.model = "tms";
    train::prepare_run(config);
    const std::shared_ptr<const nn::SequenceModel> model =
        nn::make_sequence_model(config.model, config.net);
    const std::shared_ptr<const DataSource> source =
        task_kind(kind.name).make(config.task)->data_source(model, 1, 2, config.eval_size);
    EXPECT_GT(nn::rows_in(source->heldout()), 0);
    EXPECT_GT(nn::rows_in(source->training_batch(1)), 0);
  }
}

// A public task class built without a shared_ptr: a clear error, not std::terminate.
TEST(TaskRegistry, ATaskOnTheStackRefusesToMakeADataSource) {
  train::RunConfig config;
  config.task.name = "modular";
  config.task.modular.modulus = 5;
  train::finalize(config);
  const ModularTask task("modular", config.task.modular);
  try {
    task.data_source(nn::make_sequence_model(config.model, config.net), 1, 2, 3);
    FAIL() << "no error";
  } catch (const std::logic_error& e) {
    EXPECT_TRUE(contains(e.what(), "ModularTask::data_source")) << e.what();
    EXPECT_TRUE(contains(e.what(), "not held by a shared_ptr")) << e.what();
    EXPECT_TRUE(contains(e.what(), "data::make_task or std::make_shared")) << e.what();
  }
}

TEST(TaskRegistry, UnknownNameListsTheTable) {
  TaskConfig config;
  config.name = "xyz";
  try {
    make_task(config);
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "task: unknown task 'xyz' (expected " + task_names() + ")");
  }
  for (const TaskKind& kind : task_kinds()) {
    EXPECT_EQ(contains(task_names(), kind.name), !kind.own_data);
  }
  EXPECT_EQ(task_names(), "copy, reverse, sort, recall, modular, mqar, induction, text or tms");
}

TEST(TaskRegistry, HelpAndErrorsListTheNames) {
  const auto help = run_gradlab({"train", "--help"});
  // The help wraps its lines: the names are read with the wrapping undone.
  std::string unwrapped;
  for (const char c : help.out) {
    if (!std::isspace(static_cast<unsigned char>(c))) {
      unwrapped += c;
    } else if (!unwrapped.empty() && unwrapped.back() != ' ') {
      unwrapped += ' ';
    }
  }
  EXPECT_TRUE(contains(unwrapped, task_names())) << help.out;
  TempDir dir;
  const auto bad = run_gradlab(train_args(dir.file("never"), {"--task", "bogus"}));
  EXPECT_EQ(bad.exit_code, 2) << bad.describe();
  EXPECT_TRUE(contains(bad.err, "(expected " + task_names() + ")")) << bad.err;
}

TEST(TaskRegistry, SequenceTaskCheckpointHoldsNoTextOptions) {
  TempDir dir;
  const std::string out = dir.file("run");
  const auto r = run_gradlab(train_args(out, {"--task", "reverse"}));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::string checkpoint = out + "/step-000002.h5";
  const std::vector<train::ConfigEntry> entries = train::read_checkpoint_config(checkpoint);
  for (const std::string& key : kTextKeys) {
    EXPECT_TRUE(std::none_of(entries.begin(), entries.end(),
                             [&](const train::ConfigEntry& e) { return e.first == key; }))
        << "/config/" << key << " in a reverse checkpoint";
  }
  EXPECT_TRUE(std::any_of(entries.begin(), entries.end(),
                          [](const train::ConfigEntry& e) { return e.first == "length"; }));
  const std::string config_file = testing::read_text(out + "/config.ini");
  for (const std::string& key : kTextKeys) {
    EXPECT_FALSE(contains(config_file, "\n" + key + " = ")) << key << " in config.ini";
  }
  const auto inspect = run_gradlab({"inspect", "--checkpoint", checkpoint});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.describe();
  for (const char* key : {"tokenizer", "context", "eval-iters"}) {
    EXPECT_FALSE(contains(inspect.out, std::string("  ") + key + " ")) << inspect.out;
  }
}

TEST(TaskRegistry, TextCheckpointHoldsOnlyTextOptions) {
  TempDir dir;
  const std::string text = dir.file("t.txt");
  std::ofstream(text) << std::string(40, 'a') + std::string(40, 'b') + "the end of it all\n";
  const std::string out = dir.file("run");
  const auto r = run_gradlab({"train", "--task",    "text", "--data",       text, "--context",
                              "8",     "--d-model", "16",   "--heads",      "2",  "--d-ff",
                              "16",    "--layers",  "1",    "--batch-size", "4",  "--eval-iters",
                              "4",     "--steps",   "2",    "--eval-every", "1",  "--val-fraction",
                              "0.3",   "--out",     out});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto entries = train::read_checkpoint_config(out + "/step-000002.h5");
  for (const char* key : {"length", "symbols"}) {
    EXPECT_TRUE(std::none_of(entries.begin(), entries.end(),
                             [&](const train::ConfigEntry& e) { return e.first == key; }))
        << "/config/" << key << " in a text checkpoint";
  }
  for (const std::string& key : kTextKeys) {
    EXPECT_TRUE(std::any_of(entries.begin(), entries.end(),
                            [&](const train::ConfigEntry& e) { return e.first == key; }))
        << "/config/" << key << " missing";
  }
}

// --target-accuracy, the old name of --target-exact-match, sets it, also on --resume; the new
// name wins when both are given.
TEST(TaskRegistry, OldTargetFlagStillWorks) {
  TempDir dir;
  const std::string out = dir.file("run");
  const auto r = run_gradlab(train_args(out, {"--target-accuracy", "0.5"}));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(train::load_run(out + "/step-000002.h5").config.target_exact_match, 0.5);
  EXPECT_TRUE(contains(testing::read_text(out + "/config.ini"), "\ntarget-exact-match = 0.5\n"));

  const auto resumed = run_gradlab(
      {"train", "--resume", out + "/step-000002.h5", "--steps", "3", "--target-accuracy", "0.25"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  EXPECT_EQ(train::load_run(out + "/step-000003.h5").config.target_exact_match, 0.25);

  const std::string both = dir.file("both");
  const auto r2 =
      run_gradlab(train_args(both, {"--target-accuracy", "0.5", "--target-exact-match", "0.75"}));
  ASSERT_EQ(r2.exit_code, 0) << r2.describe();
  EXPECT_EQ(train::load_run(both + "/step-000002.h5").config.target_exact_match, 0.75);
}

// A /config written with the old key, and a config file with it, still set the target.
TEST(TaskRegistry, OldTargetKeyIsRead) {
  train::RunConfig config;
  config.target_exact_match = 0.3;
  std::vector<train::ConfigEntry> entries = train::to_entries(config);
  for (auto& [key, value] : entries) {
    if (key == "target-exact-match") key = "target-accuracy";
  }
  EXPECT_EQ(train::from_entries(entries, "old.h5").target_exact_match, 0.3);

  TempDir dir;
  const std::string ini = dir.file("old.ini");
  std::ofstream(ini) << "target-accuracy = 0.4\n";
  const std::string out = dir.file("run");
  const auto r = run_gradlab(train_args(out, {"--config", ini}));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(train::load_run(out + "/step-000002.h5").config.target_exact_match, 0.4);
}

}  // namespace task_registry
}  // namespace gradlab::data
