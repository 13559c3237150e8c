// mqar: the documented layout of its batches (distinct keys and values from their halves of the
// vocabulary, every key queried once at its power-law gap with its value as the only target),
// batches a pure function of (seed, step), the fixed held-out set, the size checks naming their
// flags, the command line around it, and a small model learning it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "data/mqar_task.h"
#include "data/tasks.h"
#include "tests/cli_runner.h"
#include "tests/test_helpers.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/fit.h"
#include "train/trainer.h"

namespace gradlab::data {
namespace test_mqar_task {

using nn::kIgnoreTarget;
using testing::contains;
using testing::expect_usage_error;
using testing::run_gradlab;
using testing::TempDir;
using train::finalize;
using train::RunConfig;

TaskConfig mqar_config(int64_t pairs, int64_t context, int64_t symbols) {
  TaskConfig c;
  c.name = "mqar";
  c.mqar.pairs = pairs;
  c.text.context = context;
  c.sequence.num_symbols = symbols;
  return c;
}

std::shared_ptr<MqarTask> make(int64_t pairs, int64_t context, int64_t symbols) {
  return std::make_shared<MqarTask>("mqar", MqarOptions{.pairs = pairs}, context, symbols);
}

int64_t at(const Indices& m, int64_t row, int64_t t) {
  return m.values[static_cast<size_t>(row * m.shape[1] + t)];
}

// The gap of each pair's query in every row, in pair order: (position - 2N) / 2.
std::vector<std::vector<int64_t>> query_gaps(const MqarTask& task, const nn::SequenceBatch& b) {
  const int64_t N = task.pairs(), T = task.context();
  std::vector<std::vector<int64_t>> gaps;
  for (int64_t row = 0; row < b.inputs.shape[0]; ++row) {
    std::vector<int64_t> row_gaps(static_cast<size_t>(N), -1);
    for (int64_t t = 2 * N; t < T; ++t) {
      for (int64_t i = 0; i < N; ++i) {
        if (at(b.targets, row, t) != kIgnoreTarget &&
            at(b.inputs, row, t) == at(b.inputs, row, 2 * i)) {
          row_gaps[static_cast<size_t>(i)] = (t - 2 * N) / 2;
        }
      }
    }
    gaps.push_back(row_gaps);
  }
  return gaps;
}

// Every row of b as docs/tasks.md lays it out.
void expect_layout(const MqarTask& task, const nn::SequenceBatch& b) {
  const int64_t N = task.pairs(), T = task.context(), V = task.vocab_size();
  ASSERT_EQ(b.inputs.shape, (Shape{b.inputs.shape[0], T}));
  ASSERT_EQ(b.targets.shape, b.inputs.shape);
  EXPECT_TRUE(b.source.values.empty());
  for (int64_t row = 0; row < b.inputs.shape[0]; ++row) {
    SCOPED_TRACE("row " + std::to_string(row));
    std::map<int64_t, int64_t> value_of;
    std::set<int64_t> values;
    for (int64_t i = 0; i < N; ++i) {
      const int64_t key = at(b.inputs, row, 2 * i), value = at(b.inputs, row, 2 * i + 1);
      EXPECT_GE(key, 1);
      EXPECT_LT(key, task.first_value());
      EXPECT_GE(value, task.first_value());
      EXPECT_LT(value, V);
      EXPECT_TRUE(value_of.emplace(key, value).second) << "key " << key << " repeats";
      EXPECT_TRUE(values.insert(value).second) << "value " << value << " repeats";
    }
    std::set<int64_t> queried;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t input = at(b.inputs, row, t), target = at(b.targets, row, t);
      EXPECT_GE(input, 0);
      EXPECT_LT(input, V);
      if (target == kIgnoreTarget) continue;
      EXPECT_GE(t, 2 * N) << "a target among the pairs";
      EXPECT_EQ((t - 2 * N) % 2, 0) << "a query off its slot at " << t;
      ASSERT_TRUE(value_of.count(input)) << "query " << input << " at " << t << " is not a key";
      EXPECT_EQ(target, value_of[input]) << "the answer at " << t << " is not its key's value";
      EXPECT_TRUE(queried.insert(input).second) << "key " << input << " queried twice";
    }
    EXPECT_EQ(queried.size(), static_cast<size_t>(N)) << "a key never queried";
  }
}

TEST(MqarTask, BatchesFollowTheLayout) {
  const auto task = make(8, 64, 64);
  expect_layout(*task, task->batch(3, 5, 64));
  expect_layout(*task, task->heldout(3, 64));
  // The tightest sizes: every slot of the query region holds a query.
  const auto full = make(5, 20, 12);
  expect_layout(*full, full->batch(0, 1, 64));
  const auto odd = make(3, 15, 9);  // an odd T and V: the last input is filler
  expect_layout(*odd, odd->batch(0, 1, 64));
}

TEST(MqarTask, BatchesAreAPureFunctionOfSeedAndStep) {
  const auto task = make(4, 32, 32);
  const nn::SequenceBatch a = task->batch(7, 3, 16);
  EXPECT_EQ(task->batch(7, 3, 16).inputs.values, a.inputs.values);
  EXPECT_EQ(task->batch(7, 3, 16).targets.values, a.targets.values);
  EXPECT_NE(task->batch(7, 4, 16).inputs.values, a.inputs.values);
  EXPECT_NE(task->batch(8, 3, 16).inputs.values, a.inputs.values);

  // The held-out set is fixed, drawn from none of the training streams, and longer sets extend
  // shorter ones.
  const nn::SequenceBatch heldout = task->heldout(7, 8);
  EXPECT_EQ(task->heldout(7, 8).inputs.values, heldout.inputs.values);
  const nn::SequenceBatch longer = task->heldout(7, 16);
  EXPECT_TRUE(std::equal(heldout.inputs.values.begin(), heldout.inputs.values.end(),
                         longer.inputs.values.begin()));
  for (int64_t step = 0; step < 4; ++step) {
    EXPECT_NE(task->batch(7, step, 8).inputs.values, heldout.inputs.values);
  }

  // The data source serves the same batches to a decoder.
  RunConfig run;
  run.task = mqar_config(4, 32, 32);
  finalize(run);
  const auto model = nn::make_sequence_model(run.model, run.net);
  const auto source = task->data_source(model, 7, 16, 8);
  EXPECT_EQ(source->training_batch(3).targets.values, a.targets.values);
  EXPECT_EQ(source->heldout().inputs.values, heldout.inputs.values);
  EXPECT_EQ(run.net.max_len, 32);
  EXPECT_EQ(run.net.vocab_size, 32);
}

// Zoology's rule: the first pair's gap g has probability (g + 1)^(a - 1) / sum, so short gaps
// are far likelier than long ones (uniform gaps would put 1/28 at each).
TEST(MqarTask, QueryGapsFollowThePowerLaw) {
  const auto task = make(4, 64, 64);  // 28 slots
  const int64_t slots = 28, rows = 4000;
  double total = 0;
  for (int64_t g = 0; g < slots; ++g) total += std::pow(g + 1.0, kMqarPowerA - 1);
  std::vector<int64_t> first_pair(slots, 0);
  int64_t short_gaps = 0, long_gaps = 0;
  for (const auto& gaps : query_gaps(*task, task->batch(1, 0, rows))) {
    ++first_pair[static_cast<size_t>(gaps[0])];
    for (const int64_t g : gaps) {
      ASSERT_GE(g, 0);
      short_gaps += g < slots / 4;
      long_gaps += g >= slots - slots / 4;
    }
  }
  for (const int64_t g : {0, 1, 5, 20}) {
    const double expected = std::pow(g + 1.0, kMqarPowerA - 1) / total;
    EXPECT_NEAR(static_cast<double>(first_pair[static_cast<size_t>(g)]) / rows, expected, 0.02)
        << "gap " << g;
  }
  EXPECT_GT(short_gaps, 4 * long_gaps);
}

void expect_config_error(const TaskConfig& config, const std::vector<std::string>& named) {
  try {
    make_task(config);
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    for (const std::string& part : named) EXPECT_TRUE(contains(e.what(), part)) << e.what();
  }
}

TEST(MqarTask, ImpossibleSizesAreRefusedNamingTheFlags) {
  expect_config_error(mqar_config(0, 64, 64), {"--pairs 0"});
  expect_config_error(mqar_config(8, 31, 64), {"--context 31", "--pairs 8", ">= 4 * pairs = 32"});
  expect_config_error(mqar_config(8, 64, 17), {"--symbols 17", "--pairs 8", "2 * pairs + 2 = 18"});
  expect_config_error(mqar_config(2, 0, 64), {"--context 0"});
  expect_config_error(mqar_config(2, 8, 0), {"--symbols 0"});
  EXPECT_NO_THROW(make_task(mqar_config(8, 32, 18)));

  RunConfig seq2seq;
  seq2seq.model = "seq2seq";
  seq2seq.task = mqar_config(2, 8, 8);
  try {
    finalize(seq2seq);
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "--model")) << e.what();
  }
}

// The smallest mqar run: pairs and context as given (mqar's defaults when empty).
std::vector<std::string> mqar_run(const std::string& out, std::vector<std::string> sizes = {}) {
  std::vector<std::string> args = {"train", "--task",      "mqar", "--d-model", "8", "--heads",
                                   "2",     "--layers",    "1",    "--d-ff",    "8", "--batch-size",
                                   "2",     "--eval-size", "2",    "--steps",   "1", "--eval-every",
                                   "1",     "--out",       out};
  args.insert(args.end(), sizes.begin(), sizes.end());
  return args;
}

TEST(MqarCli, BadValuesAreUsageErrorsNamingTheFlags) {
  TempDir dir;
  const std::string never = dir.file("never");
  expect_usage_error(run_gradlab(mqar_run(never, {"--pairs", "0"})), "train", {"--pairs"});
  expect_usage_error(run_gradlab(mqar_run(never, {"--pairs", "two"})), "train", {"--pairs"});
  expect_usage_error(run_gradlab(mqar_run(never, {"--context", "-3"})), "train", {"--context"});
  expect_usage_error(run_gradlab(mqar_run(never, {"--pairs", "3", "--context", "11"})), "train",
                     {"--pairs 3", "--context 11"});
  expect_usage_error(run_gradlab(mqar_run(never, {"--symbols", "17"})), "train",
                     {"--symbols 17", "--pairs 8"});
  expect_usage_error(run_gradlab(mqar_run(never, {"--model", "seq2seq"})), "train", {"--model"});
}

// Without --symbols, mqar's vocabulary is 256; eval reports the answer accuracy and the exact
// match; the commands that read a prompt refuse an mqar model in one line.
TEST(MqarCli, TrainsEvaluatesAndRefusesPrompts) {
  TempDir dir;
  const std::string out = dir.file("run");
  const auto r = run_gradlab(mqar_run(out, {"--pairs", "2", "--context", "8"}));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::string checkpoint = out + "/step-000001.h5";
  EXPECT_EQ(train::load_run(checkpoint).config.task.sequence.num_symbols, 256);

  const auto eval = run_gradlab({"eval", "--checkpoint", checkpoint});
  ASSERT_EQ(eval.exit_code, 0) << eval.describe();
  EXPECT_TRUE(contains(eval.out, "task mqar, 2 held-out sequences")) << eval.out;
  EXPECT_TRUE(contains(eval.out, "\nanswer accuracy ")) << eval.out;
  EXPECT_TRUE(contains(eval.out, "\nexact match ")) << eval.out;

  testing::expect_runtime_failure(
      run_gradlab({"predict", "--checkpoint", checkpoint, "--input", "1 2 3"}), "predict",
      {"mqar", "gradlab eval"});
  testing::expect_runtime_failure(run_gradlab({"attention", "--checkpoint", checkpoint, "--input",
                                               "1 2 3", "--out", dir.file("maps.h5")}),
                                  "attention", {"mqar", "gradlab eval"});
}

// A 2-layer model answers nearly every query of 4 pairs in 32 tokens within a few hundred steps
// (about 200, 2 s): the layout is learnable and the metrics count the answers. A vocabulary of
// 16 keeps it short; at 32 symbols it takes over 500 steps, and d-model 32 stays on the
// plateau of guessing among the context's values (about 27%) for 800.
TEST(MqarTraining, SmallModelLearnsToRecall) {
  RunConfig c;
  c.task = mqar_config(4, 32, 16);
  c.net.d_model = 64;
  c.net.attention.num_heads = 4;
  c.net.num_layers = 2;
  c.batch_size = 32;
  c.eval_size = 256;
  c.schedule.lr = 1e-3;
  finalize(c);
  train::Trainer trainer(c);
  train::LoopPolicy policy;
  policy.steps = 600;
  policy.eval_every = 25;
  policy.target_exact_match = 0.95;
  train::Observer quiet;
  const train::Metrics m = train::fit(trainer, policy, quiet).last_metrics;
  EXPECT_GE(m.token_accuracy, 0.97) << "after " << trainer.step() << " steps";
  EXPECT_GE(m.exact_match, 0.9) << "after " << trainer.step() << " steps";
}

}  // namespace test_mqar_task
}  // namespace gradlab::data
