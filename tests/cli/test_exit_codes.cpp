// Every subcommand's exit codes, one case each: 0 success, 1 runtime failure (the command line
// was fine, the work failed: one line on stderr, no usage), 2 usage error (the reason, then the
// options). test_cli.cpp covers more variations (every subcommand's --help and unknown flags,
// bad train values, unreadable checkpoints); this file is the complete table in one place.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "autograd/cpu.h"
#include "tests/cli_runner.h"
#include "tests/test_helpers.h"
#include "train/checkpoint.h"
#include "train/process_group.h"

namespace gradlab::train {
namespace test_exit_codes {

using testing::first_line;
using testing::with;

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::contains;
using testing::expect_runtime_failure;
using testing::expect_usage_error;
using testing::kTiny;
using testing::read_text;
using testing::run_gradlab;
using testing::TempDir;

void expect_success(const CommandResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.term_signal, 0) << r.describe();
}

// One tiny trained checkpoint, shared by the tests of the commands that read one.
class ExitCodes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<TempDir>();
    const CommandResult r =
        run_gradlab(with({"train", "--out", (dir_->path() / "run").string()}, kTiny));
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    checkpoint_ = (dir_->path() / "run" / "step-000002.h5").string();
    not_hdf5_ = dir_->file("notes.h5");
    std::ofstream(not_hdf5_) << "not an HDF5 file\n";
  }
  static void TearDownTestSuite() { dir_.reset(); }
  void SetUp() override { ASSERT_TRUE(fs::exists(checkpoint_)) << "the shared run failed"; }

  static std::unique_ptr<TempDir> dir_;
  static std::string checkpoint_;  // copy task, length 2: prompts are 2 symbols of 1..3
  static std::string not_hdf5_;
};

std::unique_ptr<TempDir> ExitCodes::dir_;
std::string ExitCodes::checkpoint_;
std::string ExitCodes::not_hdf5_;

// ---------------------------------------------------------------------------------------------
// train

// Options that run gradlab with GRADLAB_ISA set to `value` (unset when empty).
testing::RunOptions isa_option(const std::string& value) {
  testing::RunOptions options;
  options.environment["GRADLAB_ISA"] = value;
  return options;
}

// --version: exit 0, the version, the kernels' instruction set next to this processor's, what
// the rest was compiled for, and whether several processes are possible.
TEST(Version, NamesTheInstructionsOfTheKernelsAndOfThisProcessor) {
  const std::string processor = isa_name(processor_isa());
  for (const std::string flag : {"--version", "version"}) {
    const CommandResult r = run_gradlab({flag}, isa_option(""));
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_TRUE(contains(r.out, "gradlab " GRADLAB_PROJECT_VERSION "\n")) << r.out;
    EXPECT_TRUE(contains(r.out, "kernels: " + processor +
                                    " (chosen at run time; this processor has " + processor + ")"))
        << r.out;
    EXPECT_TRUE(contains(r.out, "other code compiled for: " + compiled_isa() + "\n")) << r.out;
    EXPECT_TRUE(
        contains(r.out, built_with_mpi() ? "several processes: yes" : "several processes: no"))
        << r.out;
  }
}

// GRADLAB_ISA forces a lower variant, and the version says so; a value that is no variant stops
// every command with exit 1 before it does anything.
TEST(Version, GradlabIsaForcesTheKernelsAndABadValueStopsEveryCommand) {
  const CommandResult forced = run_gradlab({"--version"}, isa_option("baseline"));
  EXPECT_EQ(forced.exit_code, 0) << forced.describe();
  EXPECT_TRUE(
      contains(forced.out, "kernels: SSE2 (forced by GRADLAB_ISA=baseline; this processor has " +
                               isa_name(processor_isa()) + ")"))
      << forced.out;
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--version"}, {"explain"}}) {
    const CommandResult r = run_gradlab(args, isa_option("avx1024"));
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_TRUE(contains(r.err, "GRADLAB_ISA=avx1024 is not an instruction set")) << r.err;
    EXPECT_EQ(r.out, "") << r.describe();
  }
}

TEST_F(ExitCodes, TrainSucceeds) {
  TempDir tmp;
  const CommandResult r = run_gradlab(with({"train", "--out", tmp.file("run")}, kTiny));
  expect_success(r);
  EXPECT_TRUE(fs::exists(tmp.path() / "run" / "step-000002.h5"));
}

TEST_F(ExitCodes, TrainRuntimeFailureWhenTheRunDirectoryCannotBeCreated) {
  TempDir tmp;
  const std::string file = tmp.file("a-file");
  std::ofstream(file) << "x";
  const CommandResult r = run_gradlab(with({"train", "--out", file + "/run"}, kTiny));
  expect_runtime_failure(r, "train", file);
}

TEST_F(ExitCodes, TrainRuntimeFailureWhenTheResumeCheckpointIsNotHdf5) {
  const CommandResult r = run_gradlab({"train", "--resume", not_hdf5_});
  expect_runtime_failure(r, "train", not_hdf5_);
}

// A diverging run also exits 1: TrainTest.CliDivergenceSavesNothingFromTheDivergedState in
// tests/train/test_train.cpp.

// Regression (found by fuzz_cli with UndefinedBehaviorSanitizer): the vocabulary size
// (symbols + 2) and the sequence length were computed from unbounded flags and overflowed.
TEST_F(ExitCodes, TrainRefusesTaskSizesWhoseDerivedSizesWouldOverflow) {
  TempDir tmp;
  expect_usage_error(
      run_gradlab({"train", "--symbols", "9223372036854775807", "--out", tmp.file("never")}),
      "train", "--symbols");
  expect_usage_error(run_gradlab({"train", "--task", "recall", "--length", "4611686018427387904",
                                  "--symbols", "4611686018427387904", "--out", tmp.file("never")}),
                     "train", "--symbols");
  expect_usage_error(
      run_gradlab({"train", "--length", "9223372036854775807", "--out", tmp.file("never")}),
      "train", "--length");
  EXPECT_FALSE(fs::exists(tmp.file("never")));
}

TEST_F(ExitCodes, TrainUsageErrors) {
  TempDir tmp;
  expect_usage_error(run_gradlab({"train", "--steps", "0", "--out", tmp.file("never")}), "train",
                     "--steps");
  expect_usage_error(run_gradlab({"train", "--length", "0", "--out", tmp.file("never")}), "train",
                     "length");
  expect_usage_error(run_gradlab({"train", "--steps"}), "train", "steps");
  // A structural flag cannot change on --resume.
  expect_usage_error(run_gradlab({"train", "--resume", checkpoint_, "--d-model", "16"}), "train",
                     "--d-model");
  EXPECT_FALSE(fs::exists(tmp.file("never")));
}

// ---------------------------------------------------------------------------------------------
// eval

TEST_F(ExitCodes, EvalSucceeds) {
  const CommandResult r = run_gradlab({"eval", "--checkpoint", checkpoint_});
  expect_success(r);
  EXPECT_TRUE(contains(r.out, "exact match")) << r.out;
}

TEST_F(ExitCodes, EvalRuntimeFailureOnAFileThatIsNotHdf5) {
  expect_runtime_failure(run_gradlab({"eval", "--checkpoint", not_hdf5_}), "eval", not_hdf5_);
}

TEST_F(ExitCodes, EvalUsageErrors) {
  expect_usage_error(run_gradlab({"eval"}), "eval", "checkpoint");
  expect_usage_error(run_gradlab({"eval", "--checkpoint", checkpoint_, "--threads", "0"}), "eval",
                     "--threads");
}

// ---------------------------------------------------------------------------------------------
// predict

TEST_F(ExitCodes, PredictSucceeds) {
  const CommandResult r = run_gradlab({"predict", "--checkpoint", checkpoint_, "--input", "3 1"});
  expect_success(r);
  EXPECT_TRUE(contains(r.out, "expected 3 1")) << r.out;
}

TEST_F(ExitCodes, PredictRuntimeFailureOnAMissingCheckpoint) {
  const std::string missing = dir_->file("missing.h5");
  expect_runtime_failure(run_gradlab({"predict", "--checkpoint", missing, "--input", "3 1"}),
                         "predict", missing);
}

TEST_F(ExitCodes, PredictUsageErrors) {
  expect_usage_error(run_gradlab({"predict", "--checkpoint", checkpoint_}), "predict", "input");
  // Checked against the task after loading: still a usage error.
  expect_usage_error(run_gradlab({"predict", "--checkpoint", checkpoint_, "--input", "3 x"}),
                     "predict", "--input");
  expect_usage_error(run_gradlab({"predict", "--checkpoint", checkpoint_, "--input", "3 1 2"}),
                     "predict", "--input");
}

// ---------------------------------------------------------------------------------------------
// attention

TEST_F(ExitCodes, AttentionSucceeds) {
  TempDir tmp;
  const CommandResult r = run_gradlab(
      {"attention", "--checkpoint", checkpoint_, "--input", "2 2", "--out", tmp.file("w.h5")});
  expect_success(r);
  EXPECT_TRUE(fs::exists(tmp.file("w.h5")));
}

TEST_F(ExitCodes, AttentionRuntimeFailureWhenTheOutputCannotBeWritten) {
  TempDir tmp;
  const std::string out = tmp.file("missing-dir") + "/w.h5";
  expect_runtime_failure(
      run_gradlab({"attention", "--checkpoint", checkpoint_, "--input", "2 2", "--out", out}),
      "attention", out);
}

TEST_F(ExitCodes, AttentionUsageErrors) {
  TempDir tmp;
  expect_usage_error(run_gradlab({"attention", "--checkpoint", checkpoint_, "--input", "2 2"}),
                     "attention", "out");
  expect_usage_error(run_gradlab({"attention", "--checkpoint", checkpoint_, "--input", "9 9",
                                  "--out", tmp.file("never.h5")}),
                     "attention", "--input");
  EXPECT_FALSE(fs::exists(tmp.file("never.h5")));
}

// ---------------------------------------------------------------------------------------------
// inspect

TEST_F(ExitCodes, InspectSucceeds) {
  const CommandResult r = run_gradlab({"inspect", checkpoint_});
  expect_success(r);
  EXPECT_TRUE(contains(r.out, "total parameters")) << r.out;
}

TEST_F(ExitCodes, InspectRuntimeFailureOnATruncatedCheckpoint) {
  TempDir tmp;
  const std::string truncated = tmp.file("truncated.h5");
  const std::string bytes = read_text(checkpoint_);
  std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  const CommandResult r = run_gradlab({"inspect", truncated});
  expect_runtime_failure(r, "inspect", truncated);
  EXPECT_TRUE(contains(r.err, "truncated")) << r.err;
}

TEST_F(ExitCodes, InspectUsageErrors) {
  expect_usage_error(run_gradlab({"inspect"}), "inspect", "checkpoint");
  expect_usage_error(run_gradlab({"inspect", checkpoint_, checkpoint_}), "inspect", "");
}

// ---------------------------------------------------------------------------------------------
// explain: no runtime failure exists. It reads and writes no file, its worked example is fixed,
// and --shapes is validated while parsing (including the sizes, see below), so every failure is
// a usage error.

TEST_F(ExitCodes, ExplainSucceeds) {
  expect_success(run_gradlab({"explain"}));
  expect_success(run_gradlab({"explain", "--shapes", "2,5,8,4,2"}));
}

TEST_F(ExitCodes, ExplainUsageErrors) {
  expect_usage_error(run_gradlab({"explain", "--shapes", "1,2,3"}), "explain", "--shapes");
  expect_usage_error(run_gradlab({"explain", "--shapes", "2,5,8,3"}), "explain", "divisible");
}

// Regression: these sizes used to overflow the element count or exhaust memory in the shape walk
// (SIGSEGV, an abort from an uncaught std::bad_alloc, or a nonsense reshape error); they are now
// refused while parsing.
TEST_F(ExitCodes, ExplainRefusesShapesTooLargeForTheWalk) {
  for (const std::string shapes :
       {"4294967296,4294967296,2,1", "1,1,4611686018427387904,1", "3037000500,3037000500,1,1",
        "1000000,1000000,1000,1", "1,65536,16,1"}) {
    SCOPED_TRACE(shapes);
    expect_usage_error(run_gradlab({"explain", "--shapes", shapes}), "explain", "too large");
  }
}

// ---------------------------------------------------------------------------------------------
// gradcheck: exit 1 means "some check failed", which a correct build never produces; there is
// no input that makes a correct op fail, so that case is not tested here.

TEST_F(ExitCodes, GradcheckSucceeds) {
  const CommandResult r = run_gradlab({"gradcheck", "--op", "relu"});
  expect_success(r);
  EXPECT_TRUE(contains(r.out, "PASS")) << r.out;
}

TEST_F(ExitCodes, GradcheckUsageErrors) {
  expect_usage_error(run_gradlab({"gradcheck", "--op", "no-such-op"}), "gradcheck", "no-such-op");
  expect_usage_error(run_gradlab({"gradcheck", "--seed", "abc"}), "gradcheck", "seed");
}

// ---------------------------------------------------------------------------------------------
// Regression (found by fuzz_cli): Boost.Program_options replaces the placeholders of its
// messages (%value%, %original_token%, ...) until none is left, so a usage error about an
// argument that contains one looped forever. The arguments are now quoted with '?' for '%'.

TEST_F(ExitCodes, ArgumentsThatLookLikeMessagePlaceholdersAreUsageErrors) {
  testing::RunOptions quick;
  quick.timeout_ms = 30000;  // the bug was a hang
  expect_usage_error(run_gradlab({"train", "--steps", "%value%"}, quick), "train", "?value?");
  expect_usage_error(run_gradlab({"train", "--x%original_token%"}, quick), "train",
                     "--x?original_token?");
  expect_usage_error(
      run_gradlab({"eval", "--checkpoint", checkpoint_, "--threads", "%canonical_option%"}, quick),
      "eval", "--threads");
  TempDir tmp;
  const std::string config = tmp.file("run.ini");
  std::ofstream(config) << "steps = %value%\n";
  expect_usage_error(run_gradlab({"train", "--config", config}, quick), "train", config);
  // A '%' in a valid argument is not touched.
  const CommandResult r =
      run_gradlab({"train", "--out", tmp.file("100%"), "--steps", "1", "--length", "2", "--d-model",
                   "8", "--d-ff", "8", "--batch-size", "2", "--eval-size", "2"},
                  quick);
  expect_success(r);
  EXPECT_TRUE(fs::exists(tmp.path() / "100%" / "step-000001.h5"));
}

// ---------------------------------------------------------------------------------------------
// A model too large to build (or to save) is refused before anything is allocated: with
// --d-model 2^62 the [C, C] element count would overflow int64. The same numbers in a
// checkpoint's /config must not size an allocation either.

TEST_F(ExitCodes, TrainRefusesAModelTooLargeToBuild) {
  TempDir tmp;
  const CommandResult r = run_gradlab(
      {"train", "--d-model", "4611686018427387904", "--heads", "1", "--out", tmp.file("never")});
  expect_usage_error(r, "train", "--d-model");
}

TEST_F(ExitCodes, EvalRefusesACheckpointWhoseConfigDescribesATooLargeModel) {
  TempDir tmp;
  CheckpointData data = read_checkpoint(checkpoint_);
  for (auto& [key, value] : data.config) {
    if (key == "d-model") value = int64_t{4611686018427387904};
    if (key == "heads") value = int64_t{1};
  }
  const std::string forged = tmp.file("forged.h5");
  save_checkpoint(forged, data);
  const CommandResult r = run_gradlab({"eval", "--checkpoint", forged});
  expect_runtime_failure(r, "eval", "/config");
}

// ---------------------------------------------------------------------------------------------
// No subcommand, or an unknown one.

TEST_F(ExitCodes, TopLevel) {
  EXPECT_EQ(run_gradlab({}).exit_code, 2);
  EXPECT_EQ(run_gradlab({"bogus"}).exit_code, 2);
  EXPECT_EQ(run_gradlab({"--help"}).exit_code, 0);
}

}  // namespace test_exit_codes
}  // namespace gradlab::train
