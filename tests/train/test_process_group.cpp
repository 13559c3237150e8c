// The parts of data-parallel training that need no second process: the replica check's verdict,
// the refusals of Trainer::distribute, and a group of one (process_group.h). What needs several
// processes runs under mpirun in tests/cli/test_mpi.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <span>

#include "tests/test_helpers.h"
#include "train/trainer.h"

namespace gradlab::train {
namespace test_process_group {

using testing::contains;

// Three processes as rank 0 sees them: the others' hashes are its own, but for `differing`,
// whose are one more. Sums leave the values as they are (the others add nothing).
class PretendGroup : public ProcessGroup {
 public:
  explicit PretendGroup(std::vector<int> differing) : differing_(std::move(differing)) {}
  int size() const override { return 3; }
  std::vector<uint64_t> gather(uint64_t value) override {
    std::vector<uint64_t> all(3, value);
    for (int rank : differing_) all[rank] = value + 1;
    return all;
  }

 private:
  std::vector<int> differing_;
};

RunConfig tiny_run(int64_t batch_size) {
  RunConfig config;
  config.task.sequence.length = 3;
  config.task.sequence.num_symbols = 4;
  config.net.d_model = 8;
  config.net.attention.num_heads = 2;
  config.net.num_layers = 1;
  config.net.feed_forward.d_ff = 8;
  config.batch_size = batch_size;
  config.eval_size = 4;
  finalize(config);
  return config;
}

// Rank `rank` of `size` whose sums keep what they are given and record it: the gradients (in
// float) and the loss (the one sum in double), so that the shares of one step, each trained
// by its own trainer, can be added up afterwards in one process.
class RecordingGroup : public ProcessGroup {
 public:
  RecordingGroup(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void sum(std::span<float> values) override {
    gradients.insert(gradients.end(), values.begin(), values.end());
  }
  void sum(std::span<double> values) override { loss += values[0]; }

  std::vector<float> gradients;
  double loss = 0;

 private:
  int rank_, size_;
};

// What one process computes for step 1: the gradient of the whole batch's loss, flat, in
// parameter order, and the loss.
std::pair<std::vector<float>, double> whole_batch_gradient(const RunConfig& config) {
  const auto model = nn::make_sequence_model(config.model, config.net);
  const TaskData data(config.task, model, config.seed, config.batch_size, config.eval_size);
  const Tensor loss = model->loss(data.training_batch(1));
  loss.backward();
  std::vector<float> flat;
  for (const Tensor& p : model->parameters()) {
    const Tensor grad = p.grad();
    flat.insert(flat.end(), grad.data<float>(), grad.data<float>() + grad.numel());
  }
  return {flat, loss.item()};
}

// The shares of a batch of 8 rows on 3 processes (2 + 3 + 3), each weighted by its part of the
// targets, add up to the gradient and loss of the whole batch: the step several processes take
// is the one process's (tests/cli/test_mpi.cpp checks it through mpirun; this runs in every build).
TEST(Distribute, TheSharesOfABatchAddUpToTheWholeBatchsGradient) {
  for (const std::string kind : {"decoder", "seq2seq"}) {
    SCOPED_TRACE(kind);
    RunConfig config = tiny_run(8);
    config.model = kind;
    finalize(config);
    const auto [want, want_loss] = whole_batch_gradient(config);
    std::vector<double> got(want.size(), 0.0);
    double got_loss = 0;
    for (int rank = 0; rank < 3; ++rank) {
      Trainer share(config);
      RecordingGroup group(rank, 3);
      share.distribute(group);
      share.train_step();
      ASSERT_EQ(group.gradients.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) got[i] += group.gradients[i];
      got_loss += group.loss;
    }
    EXPECT_NEAR(got_loss, want_loss, 1e-6 * want_loss);
    double largest = 0, worst = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      largest = std::max(largest, std::abs(double{want[i]}));
      worst = std::max(worst, std::abs(got[i] - want[i]));
    }
    EXPECT_GT(largest, 0);
    EXPECT_LE(worst, 1e-5 * largest);
  }
}

TEST(ReplicaCheck, NamesEveryRankWhoseStateDiffersFromRankZeros) {
  Trainer trainer(tiny_run(4));
  PretendGroup agree({}), one({2}), two({1, 2});
  trainer.distribute(agree);
  EXPECT_NO_THROW(trainer.check_replicas());
  trainer.distribute(one);
  try {
    trainer.check_replicas();
    FAIL() << "a differing rank was not reported";
  } catch (const ReplicaMismatch& e) {
    EXPECT_TRUE(contains(e.what(), "state of rank 2 differs from rank 0's")) << e.what();
  }
  trainer.distribute(two);
  EXPECT_THROW(
      {
        try {
          trainer.check_replicas();
        } catch (const ReplicaMismatch& e) {
          EXPECT_TRUE(contains(e.what(), "ranks 1, 2 differs")) << e.what();
          throw;
        }
      },
      ReplicaMismatch);
}

TEST(ReplicaCheck, TheStateHashSeesOneStepAndOneChangedWeight) {
  Trainer trainer(tiny_run(4));
  const uint64_t start = trainer.state_hash();
  EXPECT_EQ(trainer.state_hash(), start);
  trainer.train_step();
  const uint64_t stepped = trainer.state_hash();
  EXPECT_NE(stepped, start);
  Tensor weight = trainer.model().parameters().front();
  weight.mutable_data<float>()[0] += 1e-6f;
  EXPECT_NE(trainer.state_hash(), stepped);
}

TEST(Distribute, RefusesABatchWithFewerRowsThanProcesses) {
  Trainer trainer(tiny_run(2));
  PretendGroup three({});
  try {
    trainer.distribute(three);
    FAIL() << "a batch of 2 was split over 3 processes";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "--batch-size 2 is smaller than the 3 processes")) << e.what();
  }
}

TEST(ProcessGroupOfOne, IsRankZeroOfOneAndItsCollectivesKeepTheValues) {
  ProcessGroup alone;
  EXPECT_EQ(alone.rank(), 0);
  EXPECT_EQ(alone.size(), 1);
  std::vector<float> values = {1.5f, -2.0f};
  alone.sum(values);
  EXPECT_EQ(values, (std::vector<float>{1.5f, -2.0f}));
  EXPECT_TRUE(alone.any(true));
  EXPECT_FALSE(alone.any(false));
  EXPECT_EQ(alone.gather(7), std::vector<uint64_t>{7});
  EXPECT_EQ(rank_label(alone), "");
  EXPECT_EQ(rank_label(PretendGroup({})), "rank 0 of 3");
}

}  // namespace test_process_group
}  // namespace gradlab::train
