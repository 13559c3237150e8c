// A program linked with gradlab starts on one thread, as the gradlab tool does, unless
// OMP_NUM_THREADS says otherwise; set_threads changes it. Each case runs this test binary again
// in a fresh process (earlier tests in this one may have changed the count).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "autograd/threads.h"
#include "tests/cli_runner.h"

namespace gradlab::thread_default_test {

using testing::run_command;

constexpr const char* kChildVariable = "GRADLAB_THREAD_DEFAULT_CHILD";

// The thread count this test binary starts with, in a fresh process with `environment`.
std::string threads_at_start(const std::map<std::string, std::string>& environment) {
  testing::RunOptions options;
  options.environment = environment;
  options.environment[kChildVariable] = "1";
  // A sharded run (GTEST_TOTAL_SHARDS) would give the child only its shard of the one test.
  options.environment["GTEST_TOTAL_SHARDS"] = "";
  options.environment["GTEST_SHARD_INDEX"] = "";
  const testing::CommandResult child = run_command(
      "/proc/self/exe", {"--gtest_filter=ThreadDefault.ChildPrintsItsThreads"}, options);
  EXPECT_EQ(child.exit_code, 0) << child.describe();
  const size_t at = child.out.find("threads at start: ");
  if (at == std::string::npos) return "(none printed)";
  return child.out.substr(at + 18, child.out.find('\n', at) - at - 18);
}

TEST(ThreadDefault, ChildPrintsItsThreads) {
  if (std::getenv(kChildVariable) == nullptr) GTEST_SKIP() << "run by the tests below";
  std::printf("threads at start: %d\n", threads());
}

TEST(ThreadDefault, AProgramStartsOnOneThread) {
  EXPECT_EQ(threads_at_start({{"OMP_NUM_THREADS", ""}}), "1");
}

TEST(ThreadDefault, OmpNumThreadsDecidesWhenSet) {
  EXPECT_EQ(threads_at_start({{"OMP_NUM_THREADS", "3"}}), "3");
}

TEST(ThreadDefault, SetThreadsChangesTheCount) {
  const int previous = threads();
  set_threads(3);
  EXPECT_EQ(threads(), 3);
  set_threads(0);  // at least one
  EXPECT_EQ(threads(), 1);
  set_threads(previous);
}

}  // namespace gradlab::thread_default_test
