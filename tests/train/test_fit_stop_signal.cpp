// LoopPolicy::stop_on_signal: SIGTERM or SIGINT during train::fit finishes the step, saves the
// final checkpoint as at the last step and returns StopReason::Signal; the checkpoint resumes,
// and the signals' previous handlers are back when fit returns.
#include <gtest/gtest.h>
#include <omp.h>

#include <csignal>
#include <filesystem>
#include <string>

#include "tests/cli_runner.h"
#include "tests/train/small_run.h"
#include "train/fit.h"

namespace gradlab::train {
namespace fit_stop_signal_test {

namespace fs = std::filesystem;
using testing::TempDir;

using testing::small_run_config;

// Raises `signal` in this process during step `at`'s callback, as `timeout` or Ctrl-C would.
struct RaiseAt : Observer {
  int signal;
  int64_t at;
  RaiseAt(int s, int64_t step) : signal(s), at(step) {}
  void on_step(int64_t step, const StepResult&) override {
    if (step == at) std::raise(signal);
  }
};

LoopPolicy policy_in(const std::string& dir) {
  LoopPolicy policy;
  policy.steps = 8;
  policy.eval_every = 100;
  policy.target_exact_match = 0;
  policy.out_dir = dir;
  policy.stop_on_signal = true;
  return policy;
}

void expect_default_handler(int signal) {
  struct sigaction now {};
  ASSERT_EQ(sigaction(signal, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_DFL) << "signal " << signal;
}

// Starts from the default handlers: a test binary started in the background by a
// non-interactive shell inherits SIGINT ignored, which StopSignals rightly leaves alone.
class FitStopSignal : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    omp_set_num_threads(1);
    for (const int signal : {SIGINT, SIGTERM}) {
      struct sigaction default_action {};
      default_action.sa_handler = SIG_DFL;
      sigaction(signal, &default_action, &inherited_[signal == SIGINT ? 0 : 1]);
    }
  }
  void TearDown() override {
    sigaction(SIGINT, &inherited_[0], nullptr);
    sigaction(SIGTERM, &inherited_[1], nullptr);
  }

 private:
  struct sigaction inherited_[2]{};
};

TEST_P(FitStopSignal, SavesAfterTheStepAndResumes) {
  TempDir dir;
  Trainer trainer(small_run_config());
  RaiseAt raise(GetParam(), 3);
  const FitResult result = fit(trainer, policy_in(dir.file("run")), raise);

  EXPECT_EQ(result.reason, StopReason::Signal);
  EXPECT_EQ(trainer.step(), 3);
  EXPECT_EQ(result.checkpoint, step_checkpoint_path(dir.file("run"), 3));
  ASSERT_TRUE(fs::exists(result.checkpoint));
  expect_default_handler(SIGINT);
  expect_default_handler(SIGTERM);

  // The checkpoint resumes where the run stopped and trains on to the end.
  LoadedRun resumed = load_run(result.checkpoint);
  EXPECT_EQ(resumed.trainer->step(), 3);
  Observer quiet;
  LoopPolicy rest = policy_in(dir.file("run"));
  const FitResult finished = fit(*resumed.trainer, rest, quiet);
  EXPECT_EQ(finished.reason, StopReason::Steps);
  EXPECT_EQ(resumed.trainer->step(), 8);

  // The same as a run that was never stopped.
  Trainer whole(small_run_config());
  LoopPolicy uninterrupted = policy_in(dir.file("whole"));
  fit(whole, uninterrupted, quiet);
  const CheckpointData a = resumed.trainer->checkpoint(), b = whole.checkpoint();
  ASSERT_EQ(a.model.size(), b.model.size());
  for (size_t i = 0; i < a.model.size(); ++i) {
    const Tensor& x = a.model[i].second;
    const Tensor& y = b.model[i].second;
    ASSERT_EQ(x.numel(), y.numel());
    for (int64_t j = 0; j < x.numel(); ++j) {
      ASSERT_EQ(x.data<float>()[j], y.data<float>()[j]) << a.model[i].first << " [" << j << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SigtermAndSigint, FitStopSignal, ::testing::Values(SIGTERM, SIGINT));

}  // namespace fit_stop_signal_test
}  // namespace gradlab::train
