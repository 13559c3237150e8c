// kernels::for_each_index and worth_threads: every index once, across the threads only when
// the work is large and the calling thread has threads to give; otherwise on the calling thread,
// without entering an OpenMP region (not even an inactive or nested one: each costs a team and
// a wake-up call).
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <vector>

#include "autograd/kernels/elementwise.h"
#include "tests/test_helpers.h"

namespace gradlab::kernels {
namespace test_for_each_index {

using testing::ThreadCount;

// For each index: how many times the body ran it, and the OpenMP nesting level it ran at.
struct Visits {
  std::vector<std::atomic<int>> count;
  std::vector<int> level;
  explicit Visits(int64_t n) : count(static_cast<size_t>(n)), level(static_cast<size_t>(n), -1) {}
  void run(int64_t n, bool large) {
    for_each_index(n, large, [&](int64_t i) {
      count[static_cast<size_t>(i)].fetch_add(1);
      level[static_cast<size_t>(i)] = omp_get_level();
    });
  }
};

TEST(ForEachIndex, LargeWorkOnTwoThreadsRunsEveryIndexOnceInARegion) {
  const ThreadCount two(2);
  constexpr int64_t kCount = 37;
  Visits visits(kCount);
  visits.run(kCount, true);
  for (int64_t i = 0; i < kCount; ++i) {
    EXPECT_EQ(visits.count[static_cast<size_t>(i)].load(), 1) << i;
    EXPECT_EQ(visits.level[static_cast<size_t>(i)], 1) << i;
  }
}

TEST(ForEachIndex, SmallWorkOrOneThreadStaysOutOfOpenMP) {
  constexpr int64_t kCount = 23;
  for (const auto& [count, large] : {std::pair{2, false}, std::pair{1, true}}) {
    const ThreadCount threads_now(count);
    Visits visits(kCount);
    visits.run(kCount, large);
    for (int64_t i = 0; i < kCount; ++i) {
      EXPECT_EQ(visits.count[static_cast<size_t>(i)].load(), 1) << i;
      EXPECT_EQ(visits.level[static_cast<size_t>(i)], 0) << "threads " << count << ", index " << i;
    }
  }
}

TEST(ForEachIndex, AThreadOfARegionWithOneThreadToGiveEntersNoNestedRegion) {
  const ThreadCount two(2);
  constexpr int64_t kCount = 19;
  std::vector<int> levels(2 * kCount, -1);
#pragma omp parallel num_threads(2)
  {
    set_threads(1);  // as a batch share's thread does
    const int t = omp_get_thread_num();
    EXPECT_FALSE(worth_threads(true));
    for_each_index(kCount, true, [&](int64_t i) {
      levels[static_cast<size_t>(t * kCount + i)] = omp_get_level();
    });
  }
  for (size_t i = 0; i < levels.size(); ++i) EXPECT_EQ(levels[i], 1) << i;
}

}  // namespace test_for_each_index
}  // namespace gradlab::kernels
