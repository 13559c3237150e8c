// induction: the documented layout of its batches (start token, a block of distinct symbols, the
// block again, padding with ignored targets past a shorter sequence), lengths that vary over
// [N/2, N], batches a pure function of (seed, step), the fixed held-out set and its two copies'
// targets, prompts of a first copy, the size checks naming their flags, and a short run whose
// model grows an induction head.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "data/induction_task.h"
#include "data/tasks.h"
#include "interp/head_scores.h"
#include "tests/test_helpers.h"
#include "train/config.h"
#include "train/fit.h"
#include "train/trainer.h"

namespace gradlab::data {
namespace test_induction_task {

using nn::kIgnoreTarget;
using testing::contains;

TaskConfig induction_config(int64_t length, int64_t symbols) {
  TaskConfig c;
  c.name = "induction";
  c.sequence = {.length = length, .num_symbols = symbols};
  return c;
}

std::shared_ptr<InductionTask> make(int64_t length, int64_t symbols) {
  return std::make_shared<InductionTask>("induction", induction_config(length, symbols).sequence);
}

// Row `row` of a batch as the sequence it was cut from: the inputs, then the last target.
std::vector<int64_t> sequence_of(const nn::SequenceBatch& b, int64_t row) {
  const int64_t width = b.inputs.shape[1];
  std::vector<int64_t> sequence;
  for (int64_t t = 0; t < width; ++t) {
    const int64_t target = b.targets.values[static_cast<size_t>(row * width + t)];
    if (target == kIgnoreTarget) break;
    sequence.push_back(b.inputs.values[static_cast<size_t>(row * width + t)]);
    if (t + 1 == width ||
        b.targets.values[static_cast<size_t>(row * width + t + 1)] == kIgnoreTarget) {
      sequence.push_back(target);
    }
  }
  return sequence;
}

// A row's block length, read from its sequence: start, block, block.
size_t block_of(const std::vector<int64_t>& s) {
  return s.size() / 2;
}

TEST(InductionTask, SequencesRepeatExactly) {
  const auto task = make(10, 40);
  const nn::SequenceBatch b = task->training_batch(3, 1, 64);
  ASSERT_EQ(b.inputs.shape, (std::vector<int64_t>{64, 20}));
  ASSERT_EQ(b.targets.shape, b.inputs.shape);
  EXPECT_TRUE(b.source.values.empty());
  for (int64_t row = 0; row < 64; ++row) {
    const std::vector<int64_t> s = sequence_of(b, row);
    const size_t block = block_of(s);
    ASSERT_EQ(s.size(), 1 + 2 * block);
    EXPECT_EQ(s[0], InductionTask::kStart);
    const auto first = s.begin() + 1;
    EXPECT_EQ(std::vector<int64_t>(first, first + static_cast<long>(block)),
              std::vector<int64_t>(first + static_cast<long>(block), s.end()))
        << "row " << row;
    // Inputs are the sequence shifted against the targets; past its end, padding and no target.
    for (int64_t t = 0; t < 20; ++t) {
      const size_t at = static_cast<size_t>(row * 20 + t);
      if (t + 1 < static_cast<int64_t>(s.size())) {
        EXPECT_EQ(b.targets.values[at], s[static_cast<size_t>(t) + 1]);
      } else {
        EXPECT_EQ(b.inputs.values[at], task->padding());
        EXPECT_EQ(b.targets.values[at], kIgnoreTarget);
      }
    }
  }
}

TEST(InductionTask, BlocksAreDistinctAndTheirLengthsVary) {
  const auto task = make(10, 12);
  const nn::SequenceBatch b = task->training_batch(0, 7, 1000);
  std::set<size_t> blocks;
  for (int64_t row = 0; row < 1000; ++row) {
    const std::vector<int64_t> s = sequence_of(b, row);
    const size_t block = block_of(s);
    blocks.insert(block);
    const std::set<int64_t> symbols(s.begin() + 1, s.begin() + 1 + static_cast<long>(block));
    EXPECT_EQ(symbols.size(), block) << "row " << row << " repeats a symbol";
    EXPECT_GE(*symbols.begin(), 1);
    EXPECT_LE(*symbols.rbegin(), 12);
  }
  EXPECT_EQ(blocks, (std::set<size_t>{5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(make(7, 7)->shortest_block(), 4);
}

TEST(InductionTask, BatchesAreAPureFunctionOfSeedAndStep) {
  const auto task = make(6, 20);
  const nn::SequenceBatch a = task->training_batch(5, 2, 8);
  task->training_batch(5, 9, 8);
  const nn::SequenceBatch again = task->training_batch(5, 2, 8);
  EXPECT_EQ(a.inputs.values, again.inputs.values);
  EXPECT_EQ(a.targets.values, again.targets.values);
  EXPECT_NE(task->training_batch(5, 3, 8).inputs.values, a.inputs.values);
  EXPECT_NE(task->training_batch(6, 2, 8).inputs.values, a.inputs.values);

  // The held-out set: fixed, its own stream, and a smaller one is a prefix of a larger one.
  const nn::SequenceBatch heldout = task->heldout_batch(5, 16);
  EXPECT_EQ(heldout.inputs.values, task->heldout_batch(5, 16).inputs.values);
  const nn::SequenceBatch fewer = task->heldout_batch(5, 4);
  EXPECT_TRUE(std::equal(fewer.inputs.values.begin(), fewer.inputs.values.end(),
                         heldout.inputs.values.begin()));
  EXPECT_NE(task->training_batch(5, 0, 16).inputs.values, heldout.inputs.values);
  EXPECT_THROW(task->training_batch(5, -1, 8), ConfigError);
  EXPECT_THROW(task->training_batch(5, 0, 0), ConfigError);
}

TEST(InductionTask, CopyPartsSplitEveryRowsTargets) {
  const auto task = make(8, 30);
  const nn::SequenceBatch b = task->heldout_batch(1, 32);
  const std::vector<TargetPart> parts = task->copy_parts(b);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].name, "first_copy");
  EXPECT_EQ(parts[1].name, "second_copy");
  EXPECT_EQ(task->loss_parts(), (std::vector<std::string>{"first_copy", "second_copy"}));
  const int64_t width = b.targets.shape[1];
  for (int64_t row = 0; row < 32; ++row) {
    const int64_t length = static_cast<int64_t>(block_of(sequence_of(b, row)));
    for (int64_t t = 0; t < width; ++t) {
      const size_t at = static_cast<size_t>(row * width + t);
      const int64_t target = b.targets.values[at];
      EXPECT_EQ(parts[0].targets.values[at], t < length ? target : kIgnoreTarget);
      EXPECT_EQ(parts[1].targets.values[at],
                t >= length && t < 2 * length ? target : kIgnoreTarget);
    }
  }
}

TEST(InductionTask, PromptIsAFirstCopyOfUpToNSymbols) {
  const auto task = make(6, 20);
  EXPECT_EQ(task->answer({4, 9, 2}), (std::vector<int64_t>{4, 9, 2}));
  EXPECT_EQ(task->decoding_prefix({4, 9, 2}), (std::vector<int64_t>{0, 4, 9, 2}));
  EXPECT_NO_THROW(task->validate_prompt({1, 2, 3, 4, 5, 6}));
  EXPECT_THROW(task->validate_prompt({}), ConfigError);
  EXPECT_THROW(task->validate_prompt({1, 2, 3, 4, 5, 6, 7}), ConfigError);
  EXPECT_THROW(task->validate_prompt({1, 21}), ConfigError);
  EXPECT_EQ(task->positions("decoder"), 12);
  EXPECT_THROW(task->positions("seq2seq"), ConfigError);
}

void expect_config_error(const TaskConfig& config, const std::vector<std::string>& named) {
  try {
    make_task(config);
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    for (const std::string& part : named) EXPECT_TRUE(contains(e.what(), part)) << e.what();
  }
}

TEST(InductionTask, ImpossibleSizesAreRefusedNamingTheFlags) {
  expect_config_error(induction_config(1, 10), {"--length", ">= 2"});
  expect_config_error(induction_config(0, 10), {"--length"});
  expect_config_error(induction_config(12, 11), {"--symbols 11", "--length 12"});
  expect_config_error(induction_config(4, 0), {"--symbols"});
  EXPECT_NO_THROW(make_task(induction_config(2, 2)));
  EXPECT_NO_THROW(make_task(induction_config(12, 12)));
}

// A 2-layer attention-only model without LayerNorm on blocks of 4 to 8 symbols out of 32 grows a
// layer-1 head whose induction score (on repeated random tokens, as `gradlab heads` measures) is
// above 0.4, and the second copy's loss falls below half the first's. (With LayerNorm the same
// runs lower the second copy's loss without any head scoring above 0.05: docs/tasks.md.)
TEST(InductionTraining, ShortRunFormsAnInductionHead) {
  omp_set_num_threads(2);
  train::RunConfig c;
  c.task = induction_config(8, 32);
  c.net.d_model = 32;
  c.net.attention.num_heads = 2;
  c.net.num_layers = 2;
  c.net.feed_forward.d_ff = 0;
  c.net.norm.kind = "none";
  c.batch_size = 32;
  c.eval_size = 128;
  c.schedule.lr = 3e-3;
  train::finalize(c);
  train::Trainer trainer(c);
  train::LoopPolicy policy;
  policy.steps = 800;
  policy.eval_every = 800;
  policy.target_exact_match = 0;
  train::Observer quiet;
  const train::Metrics m = train::fit(trainer, policy, quiet).last_metrics;
  ASSERT_EQ(m.parts.size(), 2u);
  EXPECT_LT(m.parts[1].loss, m.parts[0].loss / 2)
      << "first copy " << m.parts[0].loss << ", second " << m.parts[1].loss;
  const std::vector<interp::LayerHeadScores> scores = interp::head_scores(trainer.model(), {});
  ASSERT_EQ(scores.size(), 2u);
  double best = 0;
  for (const double score : scores[1].induction) best = std::max(best, score);
  EXPECT_GT(best, 0.4);
}

}  // namespace test_induction_task
}  // namespace gradlab::data
