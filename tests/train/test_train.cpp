// Training as a whole: a resumed run is bit-identical to an uninterrupted one (in process and
// through the CLI), checkpoints of a real trainer round-trip exactly, small models learn the toy
// tasks and decode them greedily, a diverging run stops before its bad update, and the data
// stream is a function of the seed. Everything runs with one OpenMP thread, the setting under
// which results are reproducible bit for bit.
#include <gtest/gtest.h>

#include <omp.h>
#include "tests/test_helpers.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/graph.h"
#include "tests/cli_runner.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/fit.h"
#include "train/trainer.h"

namespace gradlab::train {
namespace test_train {

using testing::with;

using testing::expect_identical;

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::read_text;
using testing::run_gradlab;
using testing::TempDir;

using testing::contains;

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// The small configuration most tests use; `model` is decoder or seq2seq.
RunConfig small_config(const std::string& model = "decoder", double dropout = 0.0) {
  RunConfig c;
  c.model = model;
  c.task.sequence.length = 4;
  c.net.d_model = 32;
  c.net.feed_forward.d_ff = 64;
  c.net.dropout = dropout;
  c.batch_size = 16;
  c.eval_size = 64;
  c.steps = 60;
  c.threads = 1;
  finalize(c);
  return c;
}

// Deep copies, so that later training steps do not change the snapshot.
std::vector<nn::NamedTensor> snapshot(const std::vector<nn::NamedTensor>& tensors) {
  std::vector<nn::NamedTensor> copy;
  for (const auto& [name, t] : tensors) copy.emplace_back(name, t.clone());
  return copy;
}

void expect_same_state(const CheckpointData& got, const CheckpointData& want) {
  expect_identical(got.model, want.model);
  expect_identical(got.optimizer_state, want.optimizer_state);
  EXPECT_EQ(got.optimizer_step, want.optimizer_step);
  EXPECT_EQ(got.train.step, want.train.step);
  EXPECT_EQ(got.train.data_seed, want.train.data_seed);
  EXPECT_EQ(got.train.dropout_rng, want.train.dropout_rng);
  EXPECT_TRUE(same_bits(got.train.best_metric, want.train.best_metric));
  EXPECT_EQ(got.train.best_step, want.train.best_step);
}

class TrainTest : public ::testing::Test {
 protected:
  void SetUp() override { omp_set_num_threads(1); }
};

// ---------------------------------------------------------------------------------------------
// 1. Resume equivalence.

// 60 uninterrupted steps against 30 steps, save, read, a new Trainer, restore and 30 more. The
// uninterrupted run also evaluates every 10 steps and the split one only before saving, as the
// CLI would with different --eval-every values: evaluation must not disturb training.
void expect_resume_is_bit_identical(const RunConfig& config) {
  TempDir dir;
  const std::string path = dir.file("step-000030.h5");

  Trainer straight(config);
  std::vector<double> straight_losses;
  for (int i = 1; i <= 60; ++i) {
    straight_losses.push_back(straight.train_step().loss);
    if (i % 10 == 0) straight.evaluate();
  }

  std::vector<double> split_losses;
  {
    Trainer first(config);
    for (int i = 1; i <= 30; ++i) split_losses.push_back(first.train_step().loss);
    first.evaluate();
    save_checkpoint(path, first.checkpoint());
  }
  Trainer second(config);
  second.restore(read_checkpoint(path), path);
  ASSERT_EQ(second.step(), 30);
  for (int i = 31; i <= 60; ++i) split_losses.push_back(second.train_step().loss);

  ASSERT_EQ(split_losses.size(), straight_losses.size());
  for (size_t i = 0; i < straight_losses.size(); ++i) {
    EXPECT_TRUE(same_bits(split_losses[i], straight_losses[i]))
        << "step " << i + 1 << ": resumed loss " << split_losses[i] << " vs uninterrupted "
        << straight_losses[i];
  }
  // The losses of the two halves differ from each other (the run actually trained).
  EXPECT_LT(straight_losses.back(), straight_losses.front());
  EXPECT_EQ(second.step(), straight.step());
  expect_same_state(second.checkpoint(), straight.checkpoint());
}

TEST_F(TrainTest, ResumeDecoderWithDropoutIsBitIdentical) {
  const RunConfig config = small_config("decoder", 0.1);
  // The dropout generator really moves, so restoring its state is what is being tested.
  Trainer probe(config);
  const auto before = probe.checkpoint().train.dropout_rng;
  probe.train_step();
  ASSERT_NE(probe.checkpoint().train.dropout_rng, before);
  expect_resume_is_bit_identical(config);
}

TEST_F(TrainTest, ResumeSeq2SeqWithDropoutIsBitIdentical) {
  expect_resume_is_bit_identical(small_config("seq2seq", 0.1));
}

// metrics.csv as step -> the deterministic columns (step through lr; not the timings).
std::map<int64_t, std::string> metric_rows(const fs::path& csv) {
  std::map<int64_t, std::string> rows;
  std::istringstream in(read_text(csv));
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::string kept;
    std::istringstream fields(line);
    std::string field;
    for (int i = 0; i < 7 && std::getline(fields, field, ','); ++i) kept += field + ",";
    rows[std::stoll(line.substr(0, line.find(',')))] = kept;
  }
  return rows;
}

const std::vector<std::string> kSmallFlags = {
    "--length",          "4",  "--d-model",   "32", "--d-ff",       "64",
    "--batch-size",      "16", "--eval-size", "64", "--eval-every", "10",
    "--target-accuracy", "0",  "--dropout",   "0.1"};

TEST_F(TrainTest, CliResumeMatchesUninterruptedRun) {
  TempDir tmp;
  const std::string d1 = tmp.file("d1"), d2 = tmp.file("d2");
  CommandResult r = run_gradlab(with({"train", "--steps", "30", "--out", d1}, kSmallFlags));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  r = run_gradlab({"train", "--resume", d1 + "/step-000030.h5", "--steps", "60"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  r = run_gradlab(with({"train", "--steps", "60", "--out", d2}, kSmallFlags));
  ASSERT_EQ(r.exit_code, 0) << r.describe();

  const CheckpointData resumed = read_checkpoint(d1 + "/step-000060.h5");
  const CheckpointData straight = read_checkpoint(d2 + "/step-000060.h5");
  expect_same_state(resumed, straight);

  const auto resumed_rows = metric_rows(fs::path(d1) / "metrics.csv");
  const auto straight_rows = metric_rows(fs::path(d2) / "metrics.csv");
  int shared = 0;
  for (const auto& [step, row] : resumed_rows) {
    const auto it = straight_rows.find(step);
    if (it == straight_rows.end()) continue;
    ++shared;
    EXPECT_EQ(row, it->second) << "metrics.csv row of step " << step;
  }
  // Steps 10, 20, 30 before the interruption and at least the final step 60 after it.
  EXPECT_GE(shared, 4);
  EXPECT_TRUE(resumed_rows.count(60));
}

// The resumable flags (--eval-every, --save-every, --keep) are documented as "may differ when
// resuming; all others come from the checkpoint". When they are not given on the command line,
// a resumed run should keep the checkpoint's values, as it does for --steps and
// --target-accuracy. It does not: cmd_train.cpp's parse() assigns `given.eval_every`,
// `given.save_every` and `given.keep` unconditionally, so a run started with --eval-every 10
// continues with the default 50 (and --save-every 0, --keep 3), and writes that into config.ini
// and every later checkpoint's /config. Disabled until cmd_train.cpp takes these three from the
// checkpoint unless the flag is given (vm[...].defaulted()).
TEST_F(TrainTest, CliResumeKeepsEvalEverySaveEveryAndKeep) {
  TempDir tmp;
  const std::string d1 = tmp.file("d1");
  CommandResult r = run_gradlab(with(
      {"train", "--steps", "30", "--out", d1, "--save-every", "15", "--keep", "5"}, kSmallFlags));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  r = run_gradlab({"train", "--resume", d1 + "/step-000030.h5", "--steps", "60"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto rows = metric_rows(fs::path(d1) / "metrics.csv");
  EXPECT_TRUE(rows.count(40)) << "no evaluation at step 40: --eval-every was not kept";
  EXPECT_TRUE(fs::exists(fs::path(d1) / "step-000045.h5")) << "--save-every was not kept";
  const std::string ini = read_text(fs::path(d1) / "config.ini");
  EXPECT_TRUE(contains(ini, "eval-every = 10\n")) << ini;
  EXPECT_TRUE(contains(ini, "save-every = 15\n")) << ini;
  EXPECT_TRUE(contains(ini, "keep = 5\n")) << ini;
}

// ---------------------------------------------------------------------------------------------
// 2. Checkpoint round trip from a real trainer.

TEST_F(TrainTest, CheckpointRoundTripIsBitIdentical) {
  for (const std::string optimizer : {"adamw", "sgd"}) {
    SCOPED_TRACE(optimizer);
    RunConfig config = small_config("decoder", 0.1);
    config.optimizer.name = optimizer;
    config.optimizer.momentum = optimizer == "sgd" ? 0.9 : 0.0;
    finalize(config);
    Trainer trainer(config);
    for (int i = 0; i < 5; ++i) trainer.train_step();
    trainer.record_metric(trainer.evaluate().exact_match);

    TempDir dir;
    const std::string path = dir.file("round-trip.h5");
    const CheckpointData live = trainer.checkpoint();
    ASSERT_FALSE(live.optimizer_state.empty());
    save_checkpoint(path, live);
    const CheckpointData read = read_checkpoint(path);
    expect_same_state(read, live);
    EXPECT_EQ(read.optimizer_step, 5);
    EXPECT_EQ(read.train.step, 5);
    EXPECT_EQ(read.train.best_step, 5);
    ASSERT_EQ(read.config.size(), live.config.size());
    for (size_t i = 0; i < live.config.size(); ++i) {
      EXPECT_EQ(read.config[i].first, live.config[i].first);
      EXPECT_EQ(read.config[i].second, live.config[i].second) << live.config[i].first;
    }

    // A trainer rebuilt from the file holds the same state and takes the same next step.
    const LoadedRun loaded = load_run(path);
    expect_same_state(loaded.trainer->checkpoint(), live);
    EXPECT_EQ(to_entries(loaded.config), live.config);
    EXPECT_TRUE(same_bits(loaded.trainer->train_step().loss, trainer.train_step().loss));
    expect_identical(loaded.trainer->model().named_parameters(),
                     trainer.model().named_parameters());
  }
}

// ---------------------------------------------------------------------------------------------
// 3. Learning the toy tasks, and greedy decoding of fresh prompts.

// Trains until held-out exact match reaches `target` (checked every 25 steps) or max_steps.
Metrics train_until(Trainer& trainer, double target, int64_t max_steps) {
  LoopPolicy policy;
  policy.steps = max_steps;
  policy.eval_every = 25;
  policy.target_exact_match = target;
  Observer quiet;
  return fit(trainer, policy, quiet).last_metrics;
}

// Greedy (not teacher-forced) decoding of prompts from a generator no training or held-out
// stream uses. Teacher-forced accuracy alone would not notice a causal mask that lets a
// position see the next token; free-running decoding would then fail.
void expect_greedy_correct(Trainer& trainer, const data::SequenceTask& task, int count) {
  Generator gen(0x5eed'f00d'cafeULL);
  for (int i = 0; i < count; ++i) {
    const std::vector<int64_t> sample = task.sample(gen);
    const std::vector<int64_t> prompt(sample.begin(), sample.begin() + task.prompt_length());
    const std::vector<int64_t> want = task.answer(prompt);
    const std::vector<int64_t> got =
        trainer.model().greedy_decode(prompt, data::kSeparator, task.answer_length());
    EXPECT_EQ(got, want) << "prompt " << ::testing::PrintToString(prompt);
  }
}

RunConfig task_config(const std::string& task, const std::string& model) {
  RunConfig c;
  c.model = model;
  c.task.name = task;
  c.task.sequence.length = 5;
  c.net.d_model = 32;
  c.net.feed_forward.d_ff = 64;
  c.net.num_layers = 2;
  c.net.attention.num_heads = 4;
  c.batch_size = 32;
  c.eval_size = 256;
  c.steps = 600;
  finalize(c);
  return c;
}

TEST_F(TrainTest, EndToEndCopyReachesExactMatchAndDecodesGreedily) {
  const RunConfig trainer_config = task_config("copy", "decoder");
  Trainer trainer(trainer_config);
  const Metrics m = train_until(trainer, 0.99, 400);
  EXPECT_GE(m.exact_match, 0.95) << "after " << trainer.step() << " steps";
  expect_greedy_correct(trainer, *data::make_sequence_task(trainer_config.task), 16);
}

TEST_F(TrainTest, EndToEndReverseReachesExactMatchAndDecodesGreedily) {
  const RunConfig trainer_config = task_config("reverse", "decoder");
  Trainer trainer(trainer_config);
  const Metrics m = train_until(trainer, 0.99, 400);
  EXPECT_GE(m.exact_match, 0.95) << "after " << trainer.step() << " steps";
  expect_greedy_correct(trainer, *data::make_sequence_task(trainer_config.task), 16);
}

TEST_F(TrainTest, EndToEndSeq2SeqReverseReachesExactMatchAndDecodesGreedily) {
  const RunConfig trainer_config = task_config("reverse", "seq2seq");
  Trainer trainer(trainer_config);
  const Metrics m = train_until(trainer, 0.99, 600);
  EXPECT_GE(m.exact_match, 0.95) << "after " << trainer.step() << " steps";
  expect_greedy_correct(trainer, *data::make_sequence_task(trainer_config.task), 16);
}

// A direct check of the causal mask on a trained model: changing the input at position t
// changes no logit at a position before t.
TEST_F(TrainTest, FutureTokensDoNotChangeEarlierLogits) {
  const RunConfig config = task_config("copy", "decoder");
  const auto task = data::make_sequence_task(config.task);
  Trainer trainer(config);
  for (int i = 0; i < 30; ++i) trainer.train_step();
  NoGradGuard no_grad;
  trainer.model().eval();
  const nn::SequenceBatch batch =
      trainer.model().make_batch(task->samples(7, 1, 4), task->prompt_length());
  const int64_t length = batch.inputs.shape[1];
  const Tensor base = trainer.model().forward(batch).to(DType::Float32);
  const int64_t vocab = base.size(-1);
  for (int64_t t = 1; t < length; ++t) {
    Indices changed = batch.inputs;
    for (int64_t r = 0; r < changed.shape[0]; ++r) {
      int64_t& token = changed.values[r * length + t];
      token = token % config.task.sequence.num_symbols + 1;  // another data symbol
    }
    const Tensor logits = trainer.model().forward({{}, changed, batch.targets}).to(DType::Float32);
    bool later_changed = false;
    for (int64_t r = 0; r < changed.shape[0]; ++r) {
      for (int64_t p = 0; p < length; ++p) {
        for (int64_t v = 0; v < vocab; ++v) {
          const size_t i = static_cast<size_t>((r * length + p) * vocab + v);
          const float a = base.data<float>()[i], b = logits.data<float>()[i];
          if (p < t) {
            ASSERT_EQ(a, b) << "logit at position " << p << " changed with the token at " << t;
          } else if (a != b) {
            later_changed = true;
          }
        }
      }
    }
    EXPECT_TRUE(later_changed) << "changing position " << t << " changed nothing";
  }
}

// ---------------------------------------------------------------------------------------------
// 4. Divergence.

RunConfig diverging_config() {
  RunConfig c = small_config();
  c.optimizer.name = "sgd";
  c.schedule.lr = 1e6;
  c.schedule.warmup_steps = 0;
  c.clip_norm = 0;
  finalize(c);
  return c;
}

TEST_F(TrainTest, NonFiniteLossNamesTheStepAndSkipsTheUpdate) {
  Trainer trainer(diverging_config());
  for (int i = 0; i < 50; ++i) {
    const CheckpointData before = trainer.checkpoint();
    const auto params = snapshot(before.model);
    const auto state = snapshot(before.optimizer_state);
    try {
      trainer.train_step();
    } catch (const NonFiniteLoss& e) {
      const int64_t failed = before.train.step + 1;
      EXPECT_TRUE(contains(e.what(), "at step " + std::to_string(failed))) << e.what();
      EXPECT_EQ(trainer.step(), before.train.step);
      const CheckpointData after = trainer.checkpoint();
      expect_identical(after.model, params);
      expect_identical(after.optimizer_state, state);
      EXPECT_EQ(after.optimizer_step, before.optimizer_step);
      // Every parameter is still finite: the bad update was not applied.
      for (const auto& [name, p] : after.model) {
        for (double x : p.to_vector()) ASSERT_TRUE(std::isfinite(x)) << name;
      }
      return;
    }
  }
  FAIL() << "the loss did not diverge within 50 steps at lr 1e6";
}

// A learning rate of 1e6 with SGD and no clipping blows the weights up in the first update: the
// run stops before any checkpoint (step or best.h5) is written from that state, and says so.
TEST_F(TrainTest, CliDivergenceSavesNothingFromTheDivergedState) {
  for (const char* save : {"--save-every", "--eval-every"}) {
    SCOPED_TRACE(save);
    TempDir tmp;
    const std::string out = tmp.file("run");
    const CommandResult r = run_gradlab(
        {"train", "--length",    "4",   "--d-model", "32",  "--d-ff",  "64",  "--batch-size",
         "16",    "--eval-size", "64",  "--lr",      "1e6", "--clip",  "0",   "--warmup",
         "0",     "--optimizer", "sgd", save,        "1",   "--steps", "100", "--out",
         out});
    ASSERT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_TRUE(contains(r.err, "gradlab train: stopped: the parameters' norm grew")) << r.err;
    EXPECT_TRUE(contains(r.err, "no checkpoint was saved")) << r.err;
    for (const auto& entry : fs::directory_iterator(out)) {
      EXPECT_NE(entry.path().extension(), ".h5") << entry.path();
    }
  }
}

// The best score so far: the first evaluation always sets it (a negated loss is below the -1
// a trainer starts from), later ones only when strictly higher; a NaN score never does.
TEST_F(TrainTest, RecordMetricKeepsTheBestAndNeverANan) {
  Trainer trainer(small_config());
  trainer.train_step();
  EXPECT_TRUE(trainer.record_metric(-2.5));
  EXPECT_EQ(trainer.best_metric(), -2.5);
  EXPECT_EQ(trainer.best_step(), 1);
  trainer.train_step();
  EXPECT_FALSE(trainer.record_metric(-2.5));
  EXPECT_FALSE(trainer.record_metric(std::nan("")));
  EXPECT_EQ(trainer.best_metric(), -2.5);
  EXPECT_EQ(trainer.best_step(), 1);
  EXPECT_TRUE(trainer.record_metric(-2.0));
  EXPECT_EQ(trainer.best_step(), 2);
}

// ---------------------------------------------------------------------------------------------
// 5. Data determinism.

TEST_F(TrainTest, SameConfigGivesIdenticalFirstLossAndDifferentSeedsDiffer) {
  const RunConfig config = small_config("decoder", 0.1);
  Trainer a(config), b(config);
  const double loss_a = a.train_step().loss, loss_b = b.train_step().loss;
  EXPECT_TRUE(same_bits(loss_a, loss_b)) << loss_a << " vs " << loss_b;
  expect_identical(a.model().named_parameters(), b.model().named_parameters());

  RunConfig other = config;
  other.seed = 1;
  finalize(other);
  Trainer c(other);
  const double loss_c = c.train_step().loss;
  EXPECT_FALSE(same_bits(loss_a, loss_c)) << "seeds 0 and 1 gave the same first loss " << loss_a;
  const auto pa = a.model().named_parameters(), pc = c.model().named_parameters();
  EXPECT_NE(pa.front().second.to_vector(), pc.front().second.to_vector());
}

}  // namespace test_train
}  // namespace gradlab::train
