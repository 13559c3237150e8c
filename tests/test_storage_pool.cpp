// Tensor storage is recycled: once a training step has run, further steps allocate no new
// buffers (every tensor comes from the pool).
#include <gtest/gtest.h>

#include "autograd/storage.h"
#include "autograd/tensor.h"
#include "train/trainer.h"

namespace gradlab {
namespace {

TEST(StoragePool, ReleasedBuffersAreReused) {
  const StorageStats before = storage_stats();
  { Tensor a = Tensor::zeros({123, 77}); }
  const StorageStats middle = storage_stats();
  { Tensor b = Tensor::zeros({123, 77}); }  // same size class: served from the pool
  const StorageStats after = storage_stats();
  EXPECT_EQ(after.fresh_allocations, middle.fresh_allocations);
  EXPECT_EQ(after.reused, middle.reused + 1);
  EXPECT_GE(middle.fresh_allocations + middle.reused, before.fresh_allocations + before.reused + 1);
}

TEST(StoragePool, SteadyStateTrainingStepAllocatesNoTensorStorage) {
  train::RunConfig config;  // the default copy-task model
  config.eval_size = 64;
  train::finalize(config);
  train::Trainer trainer(config);
  for (int i = 0; i < 3; ++i) trainer.train_step();  // warm the pool
  const StorageStats warm = storage_stats();
  for (int i = 0; i < 5; ++i) trainer.train_step();
  const StorageStats after = storage_stats();
  EXPECT_EQ(after.fresh_allocations, warm.fresh_allocations);
  EXPECT_GT(after.reused, warm.reused + 5 * 100);  // hundreds of tensors per step, all reused
}

}  // namespace
}  // namespace gradlab
