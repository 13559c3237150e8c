// The default runs' per-step losses against a recorded fixture, on one thread and on two: moving
// code must not change what gradlab computes, nor may the thread count. A Release build for an ISA
// the fixture has rows for must match them bit for bit; any other build (another ISA, kernels
// forced to another by GRADLAB_ISA, the sanitizers' -O1) rounds differently and is held to a
// relative tolerance instead.
//
// Recording (only when the computation is meant to change, in a commit of its own): run the
// disabled test DefaultRun.DISABLED_Record (--gtest_also_run_disabled_tests) and append its
// "<isa> <model> <step> <loss>" lines to tests/fixtures/default_run_losses.txt.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/cpu.h"
#include "train/config.h"
#include "train/fit.h"

namespace gradlab::train {
namespace test_default_run {

constexpr int64_t kSteps = 60;
// The rows other builds are compared with, within a relative tolerance.
constexpr const char* kTolerantRowsIsa = "avx512f/26.2";

const char* fixture_path() {
  return GRADLAB_TEST_FIXTURES_DIR "/default_run_losses.txt";
}

// The instruction set the kernels run (chosen at run time; GRADLAB_ISA may force it), what the
// rest was compiled for where that differs, and the processor they run on (CPU family and model
// from /proc/cpuinfo): together they set how float sums round. Other processors with the same
// ISA may be given other vector widths, so bits are compared only on the kind of processor that
// recorded them.
std::string build_isa() {
  const std::map<Isa, std::string> names{
      {Isa::avx512, "avx512f"}, {Isa::avx2, "avx2+fma"}, {Isa::baseline, "x86-64"}};
  std::string isa = names.at(kernel_isa());
  if (compiled_isa() != isa_name(kernel_isa())) isa += "+rest-" + compiled_isa();
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string family = "?", model = "?";
  for (std::string line; std::getline(cpuinfo, line) && (family == "?" || model == "?");) {
    const std::string value = line.substr(line.find(':') == std::string::npos
                                              ? line.size()
                                              : std::min(line.size(), line.find(':') + 2));
    if (line.starts_with("cpu family")) family = value;
    if (line.starts_with("model\t")) model = value;
  }
  return isa + "/" + family + "." + model;
}

RunConfig default_config(const std::string& model) {
  RunConfig config;
  config.model = model;
  finalize(config);
  return config;
}

// The losses of the first kSteps steps, trained through fit as the command line trains.
std::vector<double> default_run_losses(const std::string& model, int threads = 1) {
  struct Losses : Observer {
    std::vector<double> values;
    void on_step(int64_t, const StepResult& result) override { values.push_back(result.loss); }
  } losses;
  omp_set_num_threads(threads);
  Trainer trainer(default_config(model));
  LoopPolicy policy;
  policy.steps = kSteps;
  policy.target_exact_match = 0;
  fit(trainer, policy, losses);
  omp_set_num_threads(1);
  return losses.values;
}

// Rows "<isa> <model> <step> <loss as a hex float>"; '#' starts a comment.
std::map<std::string, std::vector<double>> read_fixture(const std::string& isa) {
  std::ifstream in(fixture_path());
  std::map<std::string, std::vector<double>> losses;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream row(line);
    std::string row_isa, model, hex;
    int64_t step = 0;
    row >> row_isa >> model >> step >> hex;
    if (row_isa != isa) continue;
    std::vector<double>& values = losses[model];
    EXPECT_EQ(step, static_cast<int64_t>(values.size()) + 1) << line;
    values.push_back(std::strtod(hex.c_str(), nullptr));
  }
  return losses;
}

void expect_matches_fixture(const std::string& model, const std::vector<double>& got) {
#ifdef NDEBUG
  const std::string isa = build_isa();
#else
  const std::string isa = "";  // unoptimised builds round differently from every fixture row
#endif
  std::map<std::string, std::vector<double>> fixture = read_fixture(isa);
  const bool exact = fixture.count(model) > 0;
  if (!exact) fixture = read_fixture(kTolerantRowsIsa);
  const std::vector<double>& want = fixture[model];
  ASSERT_EQ(want.size(), got.size()) << fixture_path() << " has no rows for " << model;
  for (size_t i = 0; i < got.size(); ++i) {
    if (exact) {
      EXPECT_EQ(got[i], want[i]) << model << " step " << i + 1 << " (" << isa << ")";
    } else {
      EXPECT_NEAR(got[i], want[i], 1e-3 * want[i]) << model << " step " << i + 1;
    }
  }
}

// On one thread and on two (kBatchShares: the same sums either way).
void expect_matches_fixture(const std::string& model) {
  for (int threads : {1, 2}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    expect_matches_fixture(model, default_run_losses(model, threads));
  }
}

TEST(DefaultRun, DecoderLossesMatchTheFixture) {
  expect_matches_fixture("decoder");
}

TEST(DefaultRun, EncoderDecoderLossesMatchTheFixture) {
  expect_matches_fixture("seq2seq");
}

TEST(DefaultRun, DISABLED_Record) {
  for (const std::string model : {"decoder", "seq2seq"}) {
    const std::vector<double> losses = default_run_losses(model);
    for (size_t i = 0; i < losses.size(); ++i) {
      std::printf("%s %s %zu %a\n", build_isa().c_str(), model.c_str(), i + 1, losses[i]);
    }
  }
}

}  // namespace test_default_run
}  // namespace gradlab::train
