// The number of threads changes how fast a run goes, not what it computes: the default copy
// model's losses with 1 and 2 threads agree to 1e-6 relative at every step. Steady-state steps
// reuse OpenMP's threads instead of starting new ones. And gradlab makes idle OpenMP threads
// sleep unless the user chose otherwise.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <pthread.h>

#include <atomic>
#include <cmath>
#include <string>

namespace test_threads {
std::atomic<int> threads_started{0};
}  // namespace test_threads

// Counts the threads this process starts: the test binary's definition comes first in symbol
// lookup, so libgomp's calls land here before going on to the C library's.
extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*),
                              void* arg) {
  using Create = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static const auto next = reinterpret_cast<Create>(dlsym(RTLD_NEXT, "pthread_create"));
  test_threads::threads_started.fetch_add(1);
  return next(thread, attr, start, arg);
}

#include "autograd/threads.h"
#include "tests/cli_runner.h"
#include "tests/test_helpers.h"
#include "train/trainer.h"

namespace gradlab::train {
namespace test_threads {

std::vector<double> losses_with_threads(int threads, int steps) {
  omp_set_num_threads(threads);
  RunConfig config;  // the default copy-task run
  config.eval_size = 16;
  config.threads = threads;
  finalize(config);
  Trainer trainer(config);
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) losses.push_back(trainer.train_step().loss);
  return losses;
}

TEST(Threads, OneAndTwoThreadsGiveTheSameLossesEveryStep) {
  const int previous = omp_get_max_threads();
  const std::vector<double> one = losses_with_threads(1, 20);
  const std::vector<double> two = losses_with_threads(2, 20);
  omp_set_num_threads(previous);
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_LE(std::abs(one[i] - two[i]), 1e-6 * std::abs(one[i])) << "step " << i + 1;
  }
}

// A parallel region nested in another one, even one running on a single thread, gets a newly
// created thread each time instead of the pool's: matrix products did that once, every call.
TEST(Threads, TwoThreadStepsStartNoNewThreads) {
  const int previous = omp_get_max_threads();
  omp_set_num_threads(2);
  RunConfig config;
  config.eval_size = 16;
  config.threads = 2;
  finalize(config);
  Trainer trainer(config);
  trainer.train_step();  // the pool starts its thread here
  const int before = ::test_threads::threads_started.load();
  for (int i = 0; i < 3; ++i) trainer.train_step();
  const int started = ::test_threads::threads_started.load() - before;
  omp_set_num_threads(previous);
  EXPECT_EQ(started, 0) << "threads started by 3 steady-state training steps";
}

// libgomp prints its settings at start-up when OMP_DISPLAY_ENV=verbose; the last block printed
// is the one of the process that does the work.
std::string last_spin_count(const std::string& err) {
  const std::string key = "GOMP_SPINCOUNT = '";
  const size_t at = err.rfind(key);
  if (at == std::string::npos) return "(not printed)";
  return err.substr(at + key.size(), err.find('\'', at + key.size()) - at - key.size());
}

TEST(Threads, IdleThreadsSleepUnlessTheUserChoseAWaitPolicy) {
  gradlab::testing::TempDir dir;
  const auto unset = gradlab::testing::run_command(
      "/usr/bin/env",
      {"-u", "OMP_WAIT_POLICY", "-u", "GOMP_SPINCOUNT", "OMP_DISPLAY_ENV=verbose", GRADLAB_BINARY,
       "train", "--steps", "2", "--threads", "2", "--out", dir.file("run")});
  ASSERT_EQ(unset.exit_code, 0) << unset.describe();
  // The arguments survived the re-execution, and its libgomp spins only briefly.
  EXPECT_TRUE(gradlab::testing::contains(unset.out, "Trained 2 steps")) << unset.out;
  EXPECT_EQ(last_spin_count(unset.err), kIdleSpinCount) << unset.err;

  const auto active = gradlab::testing::run_command(
      "/usr/bin/env", {"OMP_WAIT_POLICY=ACTIVE", "OMP_DISPLAY_ENV=verbose", GRADLAB_BINARY, "train",
                       "--steps", "2", "--out", dir.file("active")});
  ASSERT_EQ(active.exit_code, 0) << active.describe();
  EXPECT_NE(last_spin_count(active.err), "0") << active.err;
  EXPECT_NE(last_spin_count(active.err), kIdleSpinCount) << active.err;
}

}  // namespace test_threads
}  // namespace gradlab::train
