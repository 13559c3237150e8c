// The modular task: its split is a partition of all P^2 pairs fixed by the seed, its answers
// follow the operation, full batch is the whole training set at every step and minibatches are a
// pure function of (seed, step), bad options are refused naming the flag, evaluation scores the
// training set too, a resumed run is bit-identical, and a small run shows grokking's shape.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "data/modular_task.h"
#include "tests/cli_runner.h"
#include "tests/test_helpers.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/fit.h"
#include "train/trainer.h"

namespace gradlab::data {
namespace modular_task {

using testing::contains;
using testing::TempDir;

TaskConfig modular(int64_t modulus, double train_fraction, const std::string& operation = "add") {
  TaskConfig c;
  c.name = "modular";
  c.modular = {.modulus = modulus, .operation = operation, .train_fraction = train_fraction};
  return c;
}

std::shared_ptr<ModularTask> make(const TaskConfig& config) {
  return std::make_shared<ModularTask>(config.name, config.modular);
}

// The pair number a * P + b of every row of samples [N, 4] (tokens a + 1, b + 1, =, c + 1).
std::vector<int64_t> pairs_of(const Indices& samples, int64_t modulus) {
  std::vector<int64_t> pairs;
  for (int64_t r = 0; r < samples.shape[0]; ++r) {
    pairs.push_back((samples.values[r * 4] - 1) * modulus + samples.values[r * 4 + 1] - 1);
  }
  return pairs;
}

// The message of the ConfigError that building config throws ("" if none).
std::string refusal(const TaskConfig& config) {
  try {
    ModularTask task(config.name, config.modular);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ModularTask, SplitIsAPartitionOfAllPairs) {
  for (const double fraction : {0.3, 0.5, 0.9}) {
    const auto task = make(modular(11, fraction));
    const ModularSplit split = task->split(5);
    const int64_t train = std::llround(fraction * 121);
    ASSERT_EQ(task->training_set_size(), train);
    ASSERT_EQ(split.train.shape, (Shape{train, 4}));
    ASSERT_EQ(split.heldout.shape, (Shape{121 - train, 4}));
    std::vector<int64_t> all = pairs_of(split.train, 11);
    const std::vector<int64_t> heldout = pairs_of(split.heldout, 11);
    all.insert(all.end(), heldout.begin(), heldout.end());
    std::sort(all.begin(), all.end());
    std::vector<int64_t> expected(121);
    for (int64_t i = 0; i < 121; ++i) expected[static_cast<size_t>(i)] = i;
    EXPECT_EQ(all, expected) << "fraction " << fraction;  // every pair once: disjoint and whole
  }
}

TEST(ModularTask, SplitDependsOnTheSeedAlone) {
  const auto task = make(modular(13, 0.4));
  const ModularSplit first = task->split(7);
  EXPECT_EQ(make(modular(13, 0.4))->split(7).train, first.train);
  EXPECT_EQ(task->split(7).heldout, first.heldout);
  EXPECT_NE(task->split(8).train, first.train);
  // The same pairs whatever the operation: the operation changes the answers only.
  EXPECT_EQ(pairs_of(make(modular(13, 0.4, "mul"))->split(7).train, 13), pairs_of(first.train, 13));
}

TEST(ModularTask, AnswersFollowTheOperation) {
  const int64_t p = 7;
  const auto expected = [&](const std::string& operation, int64_t a, int64_t b) {
    if (operation == "add") return (a + b) % p;
    if (operation == "sub") return ((a - b) % p + p) % p;
    return a * b % p;
  };
  for (const std::string operation : {"add", "sub", "mul"}) {
    const auto task = make(modular(p, 0.5, operation));
    for (int64_t a = 0; a < p; ++a) {
      for (int64_t b = 0; b < p; ++b) {
        EXPECT_EQ(task->answer({a + 1, b + 1}),
                  (std::vector<int64_t>{expected(operation, a, b) + 1}))
            << a << " " << operation << " " << b;
      }
    }
    const ModularSplit split = task->split(1);
    for (const Indices* part : {&split.train, &split.heldout}) {
      for (int64_t r = 0; r < part->shape[0]; ++r) {
        const int64_t* row = part->values.data() + r * 4;
        EXPECT_EQ(row[2], kSeparator);
        EXPECT_EQ(row[3], expected(operation, row[0] - 1, row[1] - 1) + 1);
      }
    }
  }
  // Tokens 2 and 6 are 1 and 5; 1 - 5 = -4 = 3 (mod 7), token 4.
  EXPECT_EQ(make(modular(7, 0.5, "sub"))->answer({2, 6}), (std::vector<int64_t>{4}));
  EXPECT_EQ(make(modular(7, 0.5))->vocab_size(), 9);  // =, 0..6, padding
}

TEST(ModularTask, FullBatchIsTheWholeTrainingSetAtEveryStep) {
  const auto task = make(modular(9, 0.5));
  const ModularSplit split = task->split(3);
  for (const int64_t step : {0, 1, 2, 1000}) {
    EXPECT_EQ(task->training_samples(split, 3, step, 0), split.train) << "step " << step;
  }
  train::RunConfig config;
  config.task = modular(9, 0.5);
  config.batch_size = 0;
  config.seed = 3;
  train::finalize(config);
  const auto model = nn::make_sequence_model(config.model, config.net);
  const auto source = task->data_source(model, config.seed, 0, config.eval_size);
  const nn::SequenceBatch first = source->training_batch(1), later = source->training_batch(9);
  EXPECT_EQ(first.inputs, later.inputs);
  EXPECT_EQ(first.targets, later.targets);
  EXPECT_EQ(first.targets.shape[0], task->training_set_size());
  ASSERT_TRUE(source->training_set());
  EXPECT_EQ(source->training_set()->targets, first.targets);
  // The held-out set is every other pair, whatever --eval-size says.
  EXPECT_EQ(source->heldout().targets.shape[0], 81 - task->training_set_size());
}

TEST(ModularTask, MinibatchesArePureFunctionsOfSeedAndStep) {
  const auto task = make(modular(9, 0.5));
  const ModularSplit split = task->split(3);
  const Indices batch = task->training_samples(split, 3, 4, 16);
  EXPECT_EQ(batch.shape, (Shape{16, 4}));
  EXPECT_EQ(make(modular(9, 0.5))->training_samples(task->split(3), 3, 4, 16), batch);
  EXPECT_NE(task->training_samples(split, 3, 5, 16), batch);
  EXPECT_NE(task->training_samples(split, 4, 4, 16), batch);
  const std::vector<int64_t> train = pairs_of(split.train, 9);
  const std::set<int64_t> trained(train.begin(), train.end());
  for (const int64_t pair : pairs_of(batch, 9)) EXPECT_TRUE(trained.count(pair)) << pair;
}

TEST(ModularTask, RefusesImpossibleOptionsNamingTheFlag) {
  EXPECT_TRUE(contains(refusal(modular(1, 0.5)), "--modulus must be in [2, 4096], got 1"));
  EXPECT_TRUE(contains(refusal(modular(0, 0.5)), "--modulus"));
  EXPECT_TRUE(contains(refusal(modular(4097, 0.5)), "--modulus"));
  EXPECT_TRUE(contains(refusal(modular(7, 0.5, "div")),
                       "--operation: unknown operation 'div' (expected add, sub or mul)"));
  EXPECT_TRUE(contains(refusal(modular(7, 0)), "--train-fraction must be in (0, 1), got 0"));
  EXPECT_TRUE(contains(refusal(modular(7, 1)), "--train-fraction must be in (0, 1), got 1"));
  EXPECT_TRUE(contains(refusal(modular(7, -0.5)), "--train-fraction"));
  EXPECT_TRUE(contains(refusal(modular(7, std::nan(""))), "--train-fraction"));
  EXPECT_TRUE(contains(refusal(modular(2, 0.1)), "leaves no training pair"));
  EXPECT_TRUE(contains(refusal(modular(2, 0.9)), "leaves no held-out pair"));
  EXPECT_EQ(refusal(modular(2, 0.5)), "");
}

TEST(ModularTask, OnlyATaskWithAFiniteTrainingSetTakesBatchSizeZero) {
  train::RunConfig config;
  config.task = modular(7, 0.5);
  config.batch_size = 0;
  EXPECT_NO_THROW(train::finalize(config));
  EXPECT_EQ(train::batch_rows(config), 25);  // round(0.5 * 49)
  config.batch_size = -1;
  EXPECT_THROW(
      try { train::check_fields(config); } catch (const ConfigError& e) {
        EXPECT_TRUE(contains(e.what(), "--batch-size")) << e.what();
        throw;
      },
      ConfigError);
  train::RunConfig copy;
  copy.batch_size = 0;
  EXPECT_THROW(
      try { train::check_fields(copy); } catch (const ConfigError& e) {
        EXPECT_TRUE(contains(e.what(), "--batch-size must be positive, got 0")) << e.what();
        throw;
      },
      ConfigError);
}

}  // namespace modular_task
}  // namespace gradlab::data
