// A training step on threads (trainer.h, kBatchShares): the batch's shares computed apart and
// summed in share order give the same bits on one thread and on two, dropout included, with hooks
// running too; and the shares together are the whole batch's step.
#include <gtest/gtest.h>

#include <omp.h>
#include "tests/test_helpers.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "autograd/graph.h"
#include "autograd/ops.h"
#include "nn/hooks.h"
#include "nn/sequence_model.h"
#include "train/config.h"
#include "train/share_threads.h"
#include "train/trainer.h"

namespace gradlab::train {
namespace test_thread_shares {

using testing::expect_identical;

RunConfig config_of(const std::string& model, double dropout) {
  RunConfig c;
  c.model = model;
  c.task.sequence.length = 5;
  c.net.d_model = 24;
  c.net.feed_forward.d_ff = 40;
  c.net.dropout = dropout;
  c.batch_size = 13;  // odd: the shares differ by a row
  c.eval_size = 50;   // 4 chunks of 13 rows, the last short
  c.threads = 1;
  finalize(c);
  return c;
}

struct TrainedRun {
  CheckpointData state;
  std::vector<double> losses;
  Metrics metrics;
};

// Six steps and an evaluation on `threads` threads, with a hook that only reads on every point
// when `hooked`.
TrainedRun train(const RunConfig& config, int threads, bool hooked = false) {
  omp_set_num_threads(threads);
  Trainer trainer(config);
  std::vector<nn::Hook> hooks;
  int64_t calls = 0;
  if (hooked) {
    hooks.push_back({nn::HookFilter::all(), [&calls](const Tensor&, const std::string&) {
                       ++calls;
                       return Tensor();
                     }});
  }
  std::optional<nn::HookScope> scope;
  if (hooked) scope.emplace(trainer.model(), trainer.heldout(), hooks);
  TrainedRun run;
  for (int i = 0; i < 6; ++i) run.losses.push_back(trainer.train_step().loss);
  run.metrics = trainer.evaluate();
  run.state = trainer.checkpoint();
  if (hooked) {
    EXPECT_GT(calls, 0);
  }
  omp_set_num_threads(1);
  return run;
}

void expect_same_run(const TrainedRun& got, const TrainedRun& want) {
  expect_identical(got.state.model, want.state.model);
  expect_identical(got.state.optimizer_state, want.state.optimizer_state);
  EXPECT_EQ(got.state.train.dropout_rng, want.state.train.dropout_rng);
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t i = 0; i < want.losses.size(); ++i) {
    EXPECT_EQ(std::memcmp(&got.losses[i], &want.losses[i], sizeof(double)), 0) << "step " << i + 1;
  }
  EXPECT_EQ(std::memcmp(&got.metrics.loss, &want.metrics.loss, sizeof(double)), 0);
  EXPECT_EQ(got.metrics.token_accuracy, want.metrics.token_accuracy);
}

TEST(ThreadShares, OneAndTwoThreadsTrainAndEvaluateTheSameBits) {
  for (const std::string model : {"decoder", "seq2seq"}) {
    for (double dropout : {0.0, 0.2}) {
      SCOPED_TRACE(model + ", dropout " + std::to_string(dropout));
      const RunConfig config = config_of(model, dropout);
      const TrainedRun one = train(config, 1);
      expect_same_run(train(config, 2), one);
      // The run trained, and its steps differ.
      EXPECT_NE(one.losses.front(), one.losses.back());
      if (dropout > 0) {
        // Dropout's masks matter: a run without them ends elsewhere.
        EXPECT_NE(train(config_of(model, 0.0), 1).losses.back(), one.losses.back());
      }
    }
  }
}

// Hooked attention takes the composed path, whose sums differ from the fused kernel's in the last
// bits: a share run on another thread, where the hooks do not apply, would show.
TEST(ThreadShares, WithHooksRunningTheSharesRunOnTheCallingThreadAlike) {
  const RunConfig config = config_of("decoder", 0.2);
  expect_same_run(train(config, 2, /*hooked=*/true), train(config, 1, /*hooked=*/true));
}

// The shares' losses, weighted by their counted targets, and their summed gradients are the
// whole batch's: the step one forward and backward pass over all the rows would take.
TEST(ThreadShares, TheSharesTogetherAreTheWholeBatch) {
  RunConfig config = config_of("decoder", 0.0);
  config.task.name = "induction";  // rows with ignored targets, in unequal numbers
  config.task.sequence.length = 6;
  config.task.sequence.num_symbols = 12;
  finalize(config);
  Trainer trainer(config);
  const std::shared_ptr<data::Task> task = make_task(config);
  const auto data = task->data_source(nn::make_sequence_model(config.model, config.net),
                                      config.seed, config.batch_size, config.eval_size);
  const nn::SequenceBatch batch = data->training_batch(1);
  const Tensor whole = trainer.model().loss(batch);
  whole.backward();
  std::vector<Tensor> whole_grads;
  for (const Tensor& p : trainer.model().parameters()) whole_grads.push_back(p.grad().clone());
  trainer.model().zero_grad();

  const StepResult step = trainer.train_step();
  EXPECT_NEAR(step.loss, whole.item(), 1e-6 * std::abs(whole.item()));
  EXPECT_NEAR(step.grad_norm, global_norm(whole_grads), 1e-5 * global_norm(whole_grads));
}

// Every piece runs, on two threads at once, and the first piece's exception (in piece order)
// comes back to the caller; with hooks running every piece runs on the calling thread.
TEST(ThreadShares, PiecesAllRunAndTheFirstErrorComesBack) {
  omp_set_num_threads(2);
  std::vector<int> ran(5, 0);
  std::vector<std::thread::id> ran_on(5);
  try {
    run_pieces(5, [&](int64_t i) {
      ran[static_cast<size_t>(i)] = 1;
      ran_on[static_cast<size_t>(i)] = std::this_thread::get_id();
      if (i == 1 || i == 3) throw std::runtime_error("piece " + std::to_string(i));
    });
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "piece 1");
  }
  EXPECT_EQ(ran, std::vector<int>(5, 1));
  EXPECT_NE(ran_on[0], ran_on[1]);  // two threads took the pieces

  Trainer trainer(config_of("decoder", 0.0));
  const nn::HookScope hooks(trainer.model(), trainer.heldout(), {});
  run_pieces(5, [&](int64_t i) { ran_on[static_cast<size_t>(i)] = std::this_thread::get_id(); });
  for (const std::thread::id& id : ran_on) EXPECT_EQ(id, std::this_thread::get_id());
  omp_set_num_threads(1);
}

}  // namespace test_thread_shares
}  // namespace gradlab::train
