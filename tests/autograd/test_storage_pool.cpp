// Tensor storage is recycled: once a training step has run, further steps allocate no new
// buffers (every tensor comes from the pool).
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "autograd/storage.h"
#include "autograd/tensor.h"
#include "train/trainer.h"

namespace gradlab {
namespace test_storage_pool {

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

TEST(StoragePool, PartialReleaseGivesBackTheLargestBuffersFirst) {
  release_cached_storage();
  constexpr size_t kLarge = 300 * 1024 * 4, kMiddle = 200 * 1024 * 4, kSmall = 1024 * 4;
  {
    const std::vector<Tensor> held = {Tensor::zeros({1024}), Tensor::zeros({200, 1024}),
                                      Tensor::zeros({300, 1024}), Tensor::zeros({1024})};
  }
  ASSERT_EQ(storage_stats().cached_bytes, kLarge + kMiddle + 2 * kSmall);
  EXPECT_EQ(release_cached_storage(1), kLarge);
  EXPECT_EQ(storage_stats().cached_bytes, kMiddle + 2 * kSmall);
  // Short of the request after the middle buffer: a small one goes too, the other stays.
  EXPECT_EQ(release_cached_storage(kMiddle + 1), kMiddle + kSmall);
  EXPECT_EQ(storage_stats().cached_bytes, kSmall);

  const StorageStats before = storage_stats();
  { Tensor again = Tensor::zeros({1024}); }  // the one left is still served from the pool
  EXPECT_EQ(storage_stats().reused, before.reused + 1);
  EXPECT_EQ(release_cached_storage(), kSmall);
  EXPECT_EQ(release_cached_storage(1), 0u);
}

// Two threads training batch shares: a buffer freed on the other core would first have to come
// out of that core's cache.
TEST(StoragePool, AThreadIsGivenBackABufferItFreedItselfBeforeAMoreRecentOneOfAnother) {
  release_cached_storage();
  constexpr size_t kBytes = 12347 * 4;
  void* own = nullptr;
  auto others = std::make_unique<Storage>(kBytes);
  {
    const Storage mine(kBytes);
    own = mine.data();
  }
  std::thread([&] { others.reset(); }).join();  // the most recently freed, by another thread
  const Storage again(kBytes);
  EXPECT_EQ(again.data(), own);
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

}  // namespace test_storage_pool
}  // namespace gradlab
