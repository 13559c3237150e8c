// Command lines a careless or hostile user may type, for every command that takes them: resources
// beyond reason (--threads, sizes that cannot be allocated), special files where a file is
// expected (a FIFO must be refused, not opened: that waits forever), arguments that used to be
// dropped or taken as "absent" (stray words, empty values, negative seeds), non-finite numbers,
// and messages that must name the cause and stay short whatever the input.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "tests/cli_runner.h"
#include "tests/test_helpers.h"
#include "train/checkpoint.h"
#include "train/config.h"

namespace gradlab::train {
namespace test_bad_inputs {

using testing::first_line;
using testing::with;

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::contains;
using testing::expect_runtime_failure;
using testing::expect_usage_error;
using testing::kTiny;
using testing::run_command;
using testing::run_gradlab;
using testing::RunOptions;
using testing::TempDir;

// A wrong fix would hang on a FIFO: end such a run soon and report it as a failure.
RunOptions quick() {
  RunOptions options;
  options.timeout_ms = 30000;
  return options;
}

// One tiny trained checkpoint, shared by the tests of the commands that read one.
class BadInputs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<TempDir>();
    const CommandResult r =
        run_gradlab(with({"train", "--out", (dir_->path() / "run").string()}, kTiny));
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    checkpoint_ = (dir_->path() / "run" / "step-000002.h5").string();
  }
  static void TearDownTestSuite() { dir_.reset(); }
  void SetUp() override { ASSERT_TRUE(fs::exists(checkpoint_)) << "the shared run failed"; }

  // Each command's shortest valid command line (inspect's checkpoint is its positional
  // argument), writing only into `tmp`.
  static std::vector<std::vector<std::string>> valid_command_lines(const TempDir& tmp) {
    return {
        with({"train", "--out", tmp.file("never")}, kTiny),
        {"eval", "--checkpoint", checkpoint_},
        {"predict", "--checkpoint", checkpoint_, "--input", "3 1"},
        {"attention", "--checkpoint", checkpoint_, "--input", "2 2", "--out", tmp.file("never.h5")},
        {"sample", "--checkpoint", checkpoint_},
        {"inspect", checkpoint_},
        {"explain"},
        {"gradcheck", "--op", "relu"}};
  }

  static std::unique_ptr<TempDir> dir_;
  static std::string checkpoint_;  // copy task, length 2: prompts are 2 symbols of 1..3
};

std::unique_ptr<TempDir> BadInputs::dir_;
std::string BadInputs::checkpoint_;

// ---------------------------------------------------------------------------------------------
// Resources

// --threads 100000 used to crash every command (SIGSEGV while libgomp started the threads), and
// 2147483648 was accepted (and wrapped to a negative int).
TEST_F(BadInputs, ThreadsAboveTheCapAreUsageErrorsForEveryCommandThatTakesThem) {
  TempDir tmp;
  const std::string cap = std::to_string(max_threads());
  const std::string config = tmp.file("threads.ini");
  std::ofstream(config) << "threads = 100000\n";
  for (const std::string& threads :
       {std::string("100000"), std::string("2147483648"), std::to_string(max_threads() + 1)}) {
    for (const std::vector<std::string>& args : valid_command_lines(tmp)) {
      const std::string& command = args[0];
      if (command == "inspect" || command == "explain" || command == "gradcheck") continue;
      SCOPED_TRACE(command + " --threads " + threads);
      expect_usage_error(run_gradlab(with(args, {"--threads", threads}), quick()), command,
                         {"--threads", "[1, " + cap + "]", threads});
    }
  }
  expect_usage_error(
      run_gradlab(with({"train", "--config", config, "--out", tmp.file("never")}, kTiny), quick()),
      "train", {"--threads", "100000"});
  EXPECT_FALSE(fs::exists(tmp.file("never")));
  // The cap itself is a valid choice.
  const CommandResult at_cap = run_gradlab({"eval", "--checkpoint", checkpoint_, "--threads", cap});
  EXPECT_EQ(at_cap.exit_code, 0) << at_cap.describe();
}

// The sizes of a run are checked with the flags that set them: the message names --length or
// --symbols when they make a tensor too large, not --d-model, --d-ff and --batch-size.
TEST_F(BadInputs, SizesTooLargeNameTheFlagsThatSetThem) {
  TempDir tmp;
  const struct {
    std::vector<std::string> args, named;
  } cases[] = {
      {{"--length", "100000"}, {"--length 100000", "--batch-size 64"}},
      {{"--symbols", "1000000"}, {"--symbols 1000000", "logits"}},
      {{"--length", "4096", "--dropout", "0.1"},
       {"--length 4096", "--heads 4", "--dropout 0.1", "attention scores"}},
      {{"--eval-size", "1000000000"}, {"--eval-size 1000000000", "--length 10"}},
      {{"--d-model", "65536", "--heads", "1"}, {"--d-model 65536", "[C, C]"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.args));
    const CommandResult r = run_gradlab(with({"train", "--out", tmp.file("never")}, c.args));
    expect_usage_error(r, "train", with(c.named, {"above 2^28 elements"}));
    if (c.args[0] != "--d-model") {
      EXPECT_FALSE(contains(first_line(r.err), "--d-ff")) << r.err;
    }
  }
  EXPECT_FALSE(fs::exists(tmp.file("never")));
}

// An allocation that fails is reported in words, with the sizes that asked for it, and exits 1:
// "std::bad_alloc" alone told the user nothing. The address space is limited to 1 GB, so that
// the shape walk's [C, C] weights (2^28 floats, allowed by explain's own check) cannot be
// allocated at once.
TEST_F(BadInputs, AFailedAllocationIsReportedInWordsNamingTheSizes) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer needs far more address space than the limit leaves";
#endif
  const CommandResult r =
      run_command("/bin/sh", {"-c", "ulimit -v 1000000 && exec \"$0\" \"$@\"", GRADLAB_BINARY,
                              "explain", "--shapes", "1,1,16384,1"});
  expect_runtime_failure(r, "explain", {"out of memory", "--shapes 1,1,16384,1"});
  EXPECT_FALSE(contains(r.err, "bad_alloc")) << r.err;
}

// ---------------------------------------------------------------------------------------------
// Special files: refused before they are opened. Opening a FIFO for reading waits for a writer,
// so these used to hang (the checkpoint reader and --config opened the file first); a
// directory given as --config used to train with the defaults.

TEST_F(BadInputs, SpecialFilesAreRefusedWithoutOpeningThem) {
  TempDir tmp;
  const std::string fifo = tmp.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string dir = tmp.path().string();
  const std::vector<std::string> train = {"train", "--out", tmp.file("never")};

  expect_usage_error(run_gradlab(with(with(train, kTiny), {"--config", fifo}), quick()), "train",
                     {"--config", fifo, "a FIFO"});
  expect_usage_error(run_gradlab(with(with(train, kTiny), {"--config", dir}), quick()), "train",
                     {"--config", dir, "a directory"});
  expect_usage_error(run_gradlab(with(with(train, kTiny), {"--config", "/dev/null"}), quick()),
                     "train", {"--config", "/dev/null", "a character device"});
  // --data was already checked before it is opened; it stays so.
  expect_usage_error(
      run_gradlab(with(train, {"--task", "text", "--data", fifo, "--steps", "1"}), quick()),
      "train", {fifo, "not a regular file"});
  EXPECT_FALSE(fs::exists(tmp.file("never")));

  expect_runtime_failure(run_gradlab({"train", "--resume", fifo, "--steps", "5"}, quick()), "train",
                         {fifo, "not a regular file (a FIFO)"});
  for (std::vector<std::string> args : valid_command_lines(tmp)) {
    const std::string command = args[0];
    if (command == "train" || command == "explain" || command == "gradcheck") continue;
    std::replace(args.begin(), args.end(), checkpoint_, fifo);
    SCOPED_TRACE(command);
    expect_runtime_failure(run_gradlab(args, quick()), command,
                           {fifo, "not a regular file (a FIFO)"});
  }
  EXPECT_FALSE(fs::exists(tmp.file("never.h5")));
}

// ---------------------------------------------------------------------------------------------
// Arguments that used to be dropped or taken as absent

TEST_F(BadInputs, StrayArgumentsAreUsageErrorsForEveryCommand) {
  TempDir tmp;
  for (const std::vector<std::string>& args : valid_command_lines(tmp)) {
    SCOPED_TRACE(args[0]);
    expect_usage_error(run_gradlab(with(args, {"extra"}), quick()), args[0],
                       {"unexpected argument 'extra'"});
    // After "--" every word is an argument, not an option.
    expect_usage_error(run_gradlab(with(args, {"--", "--help"}), quick()), args[0],
                       {"unexpected argument '--help'"});
  }
  EXPECT_FALSE(fs::exists(tmp.file("never")));
  EXPECT_FALSE(fs::exists(tmp.file("never.h5")));
}

// `--resume ""`, `--config ""` and `--out ""` behaved as if absent; every text option now
// refuses an empty value, on every command.
TEST_F(BadInputs, EmptyValuesAreUsageErrorsNamingTheFlag) {
  TempDir tmp;
  const std::vector<std::string> train = with({"train"}, kTiny);
  const struct {
    std::vector<std::string> args;
    std::string flag;
  } cases[] = {
      {with(train, {"--resume", "", "--out", tmp.file("never")}), "--resume"},
      {with(train, {"--config", "", "--out", tmp.file("never")}), "--config"},
      {with(train, {"--out", ""}), "--out"},
      {with(train, {"--data", "", "--out", tmp.file("never")}), "--data"},
      {with(train, {"--task", "", "--out", tmp.file("never")}), "--task"},
      {{"eval", "--checkpoint", ""}, "--checkpoint"},
      {{"eval", "--checkpoint", checkpoint_, "--data", ""}, "--data"},
      {{"predict", "--checkpoint", checkpoint_, "--input", ""}, "--input"},
      {{"attention", "--checkpoint", checkpoint_, "--input", "2 2", "--out", ""}, "--out"},
      {{"sample", "--checkpoint", checkpoint_, "--prompt", ""}, "--prompt"},
      {{"inspect", ""}, "--checkpoint"},
      {{"explain", "--shapes", ""}, "--shapes"},
      {{"gradcheck", "--op", ""}, "--op"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.args));
    expect_usage_error(run_gradlab(c.args, quick()), c.args[0], {c.flag + " must not be empty"});
  }
  EXPECT_FALSE(fs::exists(tmp.file("never")));
}

// Boost reads "-1" as 2^64 - 1 for an unsigned option; a seed was then stored as -1.
TEST_F(BadInputs, NegativeSeedsAreUsageErrorsNamingTheSeed) {
  TempDir tmp;
  const std::string config = tmp.file("seed.ini");
  std::ofstream(config) << "seed = -1\n";
  expect_usage_error(
      run_gradlab(with({"train", "--seed", "-1", "--out", tmp.file("never")}, kTiny), quick()),
      "train", {"--seed must not be negative", "-1"});
  expect_usage_error(
      run_gradlab(with({"train", "--seed=-7", "--out", tmp.file("never")}, kTiny), quick()),
      "train", {"--seed must not be negative", "-7"});
  expect_usage_error(
      run_gradlab(with({"train", "--config", config, "--out", tmp.file("never")}, kTiny), quick()),
      "train", {config, "--seed must not be negative"});
  expect_usage_error(run_gradlab({"gradcheck", "--op", "relu", "--seed", "-1"}, quick()),
                     "gradcheck", {"--seed must not be negative"});
  expect_usage_error(run_gradlab({"sample", "--checkpoint", checkpoint_, "--seed", "-2"}, quick()),
                     "sample", {"--seed must not be negative"});
  EXPECT_FALSE(fs::exists(tmp.file("never")));
}

// ---------------------------------------------------------------------------------------------
// Non-finite numbers

TEST_F(BadInputs, NonFiniteFlagsAreUsageErrors) {
  TempDir tmp;
  for (const std::string value : {"inf", "nan", "-inf"}) {
    for (const std::string flag : {"--clip", "--weight-decay", "--lr"}) {
      SCOPED_TRACE(flag + " " + value);
      expect_usage_error(
          run_gradlab(with({"train", flag, value, "--out", tmp.file("never")}, kTiny), quick()),
          "train", {flag + " must be a finite number"});
    }
  }
  EXPECT_FALSE(fs::exists(tmp.file("never")));
}

// A NaN in a checkpoint's /config is the file's problem (exit 1, naming the file and the
// attribute), not a usage error about a flag the user never gave.
TEST_F(BadInputs, ANonFiniteNumberInACheckpointConfigNamesTheFileAndAttribute) {
  TempDir tmp;
  CheckpointData data = read_checkpoint(checkpoint_);
  for (auto& [key, value] : data.config) {
    if (key == "lr") value = std::numeric_limits<double>::quiet_NaN();
  }
  const std::string forged = tmp.file("nan-lr.h5");
  save_checkpoint(forged, data);
  expect_runtime_failure(run_gradlab({"train", "--resume", forged, "--steps", "5"}, quick()),
                         "train", {forged, "/config/lr", "not a finite number"});
  expect_runtime_failure(run_gradlab({"eval", "--checkpoint", forged}, quick()), "eval",
                         {forged, "/config/lr", "not a finite number"});
}

// ---------------------------------------------------------------------------------------------
// Messages stay short: a bad input is quoted by its first 80 bytes, then "...", and a control
// character cannot break the one-line reason.

TEST_F(BadInputs, ABadInputIsQuotedByABoundedPrefix) {
  TempDir tmp;
  const std::string huge(130000, 'x');
  const std::string shown = "'" + std::string(80, 'x') + "...'";
  const std::vector<std::string> train = {"train", "--out", tmp.file("never")};
  std::vector<std::vector<std::string>> cases = {
      with(train, {"--steps", huge}),
      with(train, {"--task", huge}),
      with(train, {"--optimizer", huge}),
      with(train, {"--" + huge}),
      {"predict", "--checkpoint", checkpoint_, "--input", huge},
      {"explain", "--shapes", huge},
      {"gradcheck", "--op", huge},
  };
  cases.push_back(with(train, {huge}));  // a stray argument
  for (const std::vector<std::string>& args : cases) {
    SCOPED_TRACE(args[0] + " " + args[args.size() - 2].substr(0, 20));
    const CommandResult r = run_gradlab(args, quick());
    EXPECT_EQ(r.exit_code, 2) << r.describe().substr(0, 2000);
    EXPECT_LT(first_line(r.err).size(), 300u) << first_line(r.err).substr(0, 2000);
    EXPECT_TRUE(contains(first_line(r.err), std::string(70, 'x') + "...")) << r.err.substr(0, 400);
  }
  const CommandResult unknown = run_gradlab({huge});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_TRUE(contains(first_line(unknown.err), shown)) << unknown.err.substr(0, 400);
  // A newline in the input is shown escaped, in the reason's one line.
  const CommandResult newline = run_gradlab(with(train, {"--task", "co\npy"}), quick());
  EXPECT_EQ(newline.exit_code, 2) << newline.describe();
  EXPECT_TRUE(contains(first_line(newline.err), "'co\\npy'")) << newline.err;
  EXPECT_FALSE(fs::exists(tmp.file("never")));
}

}  // namespace test_bad_inputs
}  // namespace gradlab::train
