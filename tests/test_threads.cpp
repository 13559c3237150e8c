// The number of threads changes how fast a run goes, not what it computes: the default copy
// model's losses with 1 and 2 threads agree to 1e-6 relative at every step.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>

#include "train/trainer.h"

namespace gradlab::train {
namespace {

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

}  // namespace
}  // namespace gradlab::train
