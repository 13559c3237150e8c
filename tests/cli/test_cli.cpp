// The gradlab executable as a user meets it: exit codes (0 success, 1 runtime failure, 2 usage
// error), help and usage text, the output of every subcommand, the files of a run directory,
// --resume rules, and a clean stop on SIGINT/SIGTERM.
#include <H5Cpp.h>
#include <gtest/gtest.h>

#include "tests/test_helpers.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli_runner.h"
#include "tests/h5_reading.h"
#include "train/checkpoint.h"

namespace gradlab::train {
namespace test_cli {

using testing::first_line;
using testing::with;

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::read_floats;
using testing::read_text;
using testing::run_gradlab;
using testing::RunOptions;
using testing::shared_run;
using testing::TempDir;

using testing::contains;
using testing::expect_usage_error;

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The text after `marker` up to the end of its line ("" if absent).
std::string after(const std::string& text, const std::string& marker) {
  const size_t at = text.find(marker);
  if (at == std::string::npos) return "";
  return first_line(text.substr(at + marker.size()));
}

// A small copy-task model (length 4, so prompts are 4 symbols of 1..10).
const std::vector<std::string> kSmall = {"--length",     "4",  "--d-model",   "32", "--d-ff", "64",
                                         "--batch-size", "16", "--eval-size", "64"};

const std::vector<std::string> kSubcommands = {"train",   "eval",    "predict",   "attention",
                                               "inspect", "explain", "gradcheck", "sample"};

class CliTest : public ::testing::Test {};

// One trained checkpoint (decoder) and one barely trained seq2seq checkpoint, shared by the
// tests that only read them or resume from them into other directories.
class CliCheckpointTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    trained_ =
        after(shared_run(with({"train", "--steps", "200", "--target-accuracy", "0"}, kSmall)).out,
              "Checkpoint: ");
    seq2seq_ = after(shared_run(with({"train", "--model", "seq2seq", "--steps", "2"}, kSmall)).out,
                     "Checkpoint: ");
  }

  void SetUp() override {
    ASSERT_TRUE(fs::exists(trained_)) << "the shared training run failed";
    ASSERT_TRUE(fs::exists(seq2seq_)) << "the shared seq2seq run failed";
  }

  static std::string trained_;  // copy task, length 4, 200 steps: every held-out answer right
  static std::string seq2seq_;  // copy task, length 4, two steps
};

std::string CliCheckpointTest::trained_;
std::string CliCheckpointTest::seq2seq_;

// ---------------------------------------------------------------------------------------------
// Exit codes, help and usage.

TEST_F(CliTest, NoCommandIsAUsageError) {
  const CommandResult r = run_gradlab({});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_TRUE(contains(r.err, "no command")) << r.err;
  EXPECT_TRUE(contains(r.err, "usage: gradlab")) << r.err;
  for (const std::string& command : kSubcommands) EXPECT_TRUE(contains(r.err, command)) << command;
}

TEST_F(CliTest, UnknownCommandIsAUsageError) {
  const CommandResult r = run_gradlab({"bogus"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_TRUE(contains(first_line(r.err), "'bogus'")) << r.err;
  EXPECT_TRUE(contains(r.err, "usage: gradlab")) << r.err;
}

TEST_F(CliTest, TopLevelHelpListsTheCommands) {
  const CommandResult r = run_gradlab({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  for (const std::string& command : kSubcommands) EXPECT_TRUE(contains(r.out, command)) << command;
}

TEST_F(CliTest, HelpOfEverySubcommandPrintsItsOptions) {
  const std::vector<std::pair<std::string, std::string>> own_flag = {
      {"train", "--d-model"}, {"eval", "--checkpoint"},    {"predict", "--input"},
      {"attention", "--out"}, {"inspect", "--checkpoint"}, {"explain", "--shapes"},
      {"gradcheck", "--op"}};
  for (const auto& [command, flag] : own_flag) {
    const CommandResult r = run_gradlab({command, "--help"});
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.describe();
    EXPECT_TRUE(contains(r.out, "gradlab " + command)) << r.out;
    EXPECT_TRUE(contains(r.out, "Options:")) << r.out;
    EXPECT_TRUE(contains(r.out, "--help")) << r.out;
    EXPECT_TRUE(contains(r.out, flag)) << command << " --help does not list " << flag;
    EXPECT_EQ(r.err, "") << command;
  }
  // Every hyperparameter flag of train, with its default.
  const CommandResult r = run_gradlab({"train", "--help"});
  for (const char* flag :
       {"--task", "--length", "--heads", "--layers", "--dropout", "--lr", "--optimizer",
        "--schedule", "--steps", "--resume", "--config", "--save-every", "--keep",
        "--target-exact-match", "--target-accuracy", "--seed"}) {
    EXPECT_TRUE(contains(r.out, flag)) << "train --help does not list " << flag;
  }
  // Defaults as typed, not as the nearest 17-digit expansion of the double.
  for (const char* shown : {"--lr arg (=0.003)", "--beta2 arg (=0.98)", "--eps arg (=1e-08)",
                            "--target-exact-match arg (=0.99)", "--clip arg (=1)"}) {
    EXPECT_TRUE(contains(r.out, shown)) << "train --help does not show " << shown << ":\n" << r.out;
  }
}

TEST_F(CliTest, UnknownFlagIsAUsageErrorForEverySubcommand) {
  for (const std::string& command : kSubcommands) {
    SCOPED_TRACE(command);
    const CommandResult r = run_gradlab({command, "--bogus-flag"});
    expect_usage_error(r, command);
    EXPECT_TRUE(contains(first_line(r.err), "--bogus-flag")) << r.err;
  }
}

TEST_F(CliTest, BadTrainValuesAreUsageErrorsNamingTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> named;  // each must appear in the one-line reason
  };
  const std::vector<Case> cases = {
      {{"--steps", "-5"}, {"--steps", "-5"}},
      {{"--d-model", "10", "--heads", "3"}, {"--d-model", "10", "--heads", "3"}},
      {{"--task", "bogus"}, {"bogus"}},
      {{"--batch-size", "0"}, {"--batch-size", "0"}},
      {{"--model", "rnn"}, {"--model", "rnn"}},
      {{"--dropout", "1.5"}, {"--dropout", "1.5"}},
      {{"--steps", "ten"}, {"--steps", "ten"}},
  };
  TempDir tmp;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.args));
    const CommandResult r = run_gradlab(with({"train", "--out", tmp.file("never")}, c.args));
    expect_usage_error(r, "train");
    for (const std::string& part : c.named) {
      EXPECT_TRUE(contains(first_line(r.err), part)) << "reason does not name " << part << ":\n"
                                                     << first_line(r.err);
    }
  }
  EXPECT_FALSE(fs::exists(tmp.file("never")));
}

TEST_F(CliTest, BadConfigFilesAreUsageErrorsNamingTheFile) {
  TempDir tmp;
  const std::string missing = tmp.file("missing.ini");
  const std::string unknown = tmp.file("unknown.ini");
  std::ofstream(unknown) << "bogus-key = 3\n";
  const std::string invalid = tmp.file("invalid.ini");
  std::ofstream(invalid) << "steps = abc\n";
  for (const std::string& file : {missing, unknown, invalid}) {
    SCOPED_TRACE(file);
    const CommandResult r = run_gradlab({"train", "--config", file, "--out", tmp.file("never")});
    expect_usage_error(r, "train");
    EXPECT_TRUE(contains(first_line(r.err), file)) << r.err;
  }
  EXPECT_FALSE(fs::exists(tmp.file("never")));
}

TEST_F(CliTest, MissingCheckpointFlagIsAUsageError) {
  for (const std::string command : {"eval", "predict", "attention", "inspect"}) {
    SCOPED_TRACE(command);
    std::vector<std::string> args{command};
    if (command == "predict" || command == "attention") args = with(args, {"--input", "1 2 3 4"});
    if (command == "attention") args = with(args, {"--out", "never-written.h5"});
    const CommandResult r = run_gradlab(args);
    expect_usage_error(r, command);
    EXPECT_TRUE(contains(first_line(r.err), "checkpoint")) << r.err;
  }
}

// ---------------------------------------------------------------------------------------------
// Runtime failures: exit 1 with one line naming the file.

TEST_F(CliCheckpointTest, UnreadableCheckpointsAreRuntimeFailuresNamingTheFile) {
  TempDir tmp;
  const std::string missing = tmp.file("missing.h5");
  const std::string text = tmp.file("notes.h5");
  std::ofstream(text) << "this is not an HDF5 file\n";
  const std::string truncated = tmp.file("truncated.h5");
  {
    const std::string bytes = read_text(trained_);
    ASSERT_GT(bytes.size(), 1000u);
    std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  for (const std::string& file : {missing, text, truncated}) {
    for (const std::string command : {"eval", "inspect", "predict"}) {
      SCOPED_TRACE(command + " " + file);
      std::vector<std::string> args{command, "--checkpoint", file};
      if (command == "predict") args = with(args, {"--input", "1 2 3 4"});
      const CommandResult r = run_gradlab(args);
      EXPECT_EQ(r.exit_code, 1) << r.describe();
      EXPECT_TRUE(contains(r.err, file)) << r.err;
      EXPECT_EQ(lines(r.err).size(), 1u) << r.err;
      EXPECT_FALSE(contains(r.err, "Options:")) << "a runtime failure printed the usage";
    }
  }
  EXPECT_TRUE(contains(run_gradlab({"eval", "--checkpoint", text}).err, "not an HDF5 file"));
  EXPECT_TRUE(contains(run_gradlab({"eval", "--checkpoint", truncated}).err, "truncated"));
}

// ---------------------------------------------------------------------------------------------
// The subcommands that read a checkpoint.

TEST_F(CliCheckpointTest, EvalPrintsTheMetrics) {
  const CommandResult r = run_gradlab({"eval", "--checkpoint", trained_});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "task copy")) << r.out;
  EXPECT_TRUE(contains(r.out, "exact match 1.0000")) << r.out;
  EXPECT_TRUE(contains(r.out, "token accuracy")) << r.out;
}

TEST_F(CliCheckpointTest, PredictPrintsInputOutputExpectedAndVerdict) {
  for (const std::string prompt : {"1 2 3 4", "10 9 8 7", "5 5 5 5", "3 1 4 1"}) {
    const CommandResult r = run_gradlab({"predict", "--checkpoint", trained_, "--input", prompt});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    const std::vector<std::string> out = lines(r.out);
    ASSERT_EQ(out.size(), 4u) << r.out;
    EXPECT_EQ(out[0], "input    " + prompt);
    EXPECT_TRUE(out[1].starts_with("output   ")) << out[1];
    EXPECT_EQ(out[2], "expected " + prompt);  // the copy task
    EXPECT_EQ(out[3], out[1].substr(9) == prompt ? "correct" : "wrong");
    EXPECT_EQ(out[3], "correct") << "the trained model got " << prompt << " wrong";
  }
  // A barely trained model: the verdict still matches the output, whichever it is.
  const CommandResult s = run_gradlab({"predict", "--checkpoint", seq2seq_, "--input", "1 2 3 4"});
  ASSERT_EQ(s.exit_code, 0) << s.describe();
  const std::vector<std::string> out = lines(s.out);
  ASSERT_EQ(out.size(), 4u) << s.out;
  EXPECT_EQ(out[3], out[1].substr(9) == "1 2 3 4" ? "correct" : "wrong");
}

TEST_F(CliCheckpointTest, PredictWithAMalformedInputIsAUsageError) {
  for (const std::string input : {"1 2 x 4", "1 2 3", "1 2 3 4 5", "1 2 3 11", "0 1 2 3", ""}) {
    SCOPED_TRACE("'" + input + "'");
    const CommandResult r = run_gradlab({"predict", "--checkpoint", trained_, "--input", input});
    expect_usage_error(r, "predict");
    EXPECT_TRUE(contains(first_line(r.err), "--input")) << r.err;
  }
}

TEST_F(CliCheckpointTest, InspectPrintsConfigAndParameterTable) {
  const CheckpointData data = read_checkpoint(trained_);
  int64_t total = 0;
  for (const auto& [name, t] : data.model) total += t.numel();
  for (const bool positional : {false, true}) {
    const CommandResult r =
        run_gradlab(positional ? std::vector<std::string>{"inspect", trained_}
                               : std::vector<std::string>{"inspect", "--checkpoint", trained_});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_TRUE(contains(r.out, "config:")) << r.out;
    for (const auto& [key, value] : data.config) {
      EXPECT_TRUE(contains(r.out, key)) << "config key " << key << " missing";
    }
    EXPECT_TRUE(contains(r.out, "d-model            32")) << r.out;
    EXPECT_TRUE(contains(r.out, "parameter")) << r.out;
    for (const auto& [name, t] : data.model) {
      EXPECT_TRUE(contains(r.out, name + " ")) << "parameter " << name << " missing";
    }
    EXPECT_TRUE(contains(r.out, "total parameters " + std::to_string(total))) << r.out;
  }
}

// A 1-D int64 dataset or attribute.
template <class Source>
std::vector<int64_t> read_ints(const Source& source) {
  std::vector<int64_t> values(static_cast<size_t>(source.getSpace().getSimpleExtentNpoints()));
  if constexpr (std::is_same_v<Source, H5::Attribute>) {
    source.read(H5::PredType::NATIVE_INT64, values.data());
  } else {
    source.read(values.data(), H5::PredType::NATIVE_INT64);
  }
  return values;
}

// [H, T, T] weights: every row sums to 1, and if causal nothing above the diagonal.
void expect_attention(const H5::H5File& file, const std::string& name, hsize_t heads,
                      hsize_t length, bool causal) {
  SCOPED_TRACE(name);
  std::vector<hsize_t> dims;
  const std::vector<float> w = read_floats(file, name, dims);
  ASSERT_EQ(dims, (std::vector<hsize_t>{heads, length, length}));
  for (hsize_t h = 0; h < heads; ++h) {
    for (hsize_t q = 0; q < length; ++q) {
      double sum = 0;
      for (hsize_t k = 0; k < length; ++k) {
        const float v = w[(h * length + q) * length + k];
        sum += v;
        if (causal && k > q) {
          EXPECT_EQ(v, 0.0f) << "head " << h << " query " << q << " key " << k;
        }
      }
      EXPECT_NEAR(sum, 1.0, 1e-5) << "head " << h << " query " << q;
    }
  }
}

TEST_F(CliCheckpointTest, AttentionWritesOneHeadsByQueriesByKeysDatasetPerLayer) {
  TempDir tmp;
  const std::string out = tmp.file("attention.h5");
  CommandResult r =
      run_gradlab({"attention", "--checkpoint", trained_, "--input", "4 3 2 1", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  ASSERT_TRUE(fs::exists(out));
  EXPECT_GT(fs::file_size(out), 0u);
  H5::Exception::dontPrint();
  {
    const H5::H5File file(out, H5F_ACC_RDONLY);
    // Decoder: prompt (4), separator, answer minus its last token (3): T = 8; 4 heads, 2 layers.
    for (const char* layer : {"layer_0", "layer_1"}) expect_attention(file, layer, 4, 8, true);
    EXPECT_FALSE(file.nameExists("layer_2"));
  }

  const std::string out2 = tmp.file("attention-seq2seq.h5");
  r = run_gradlab({"attention", "--checkpoint", seq2seq_, "--input", "4 3 2 1", "--out", out2});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const H5::H5File file(out2, H5F_ACC_RDONLY);
  for (const char* layer : {"encoder_layer_0", "encoder_layer_1"}) {
    expect_attention(file, layer, 4, 4, false);
  }
  for (const char* layer : {"decoder_layer_0", "decoder_layer_1"}) {
    expect_attention(file, layer, 4, 4, true);
  }
  // Cross-attention: the decoder's 4 inputs (separator, answer minus its last token) over the
  // encoder's 4 source tokens, labelled with both.
  const std::vector<int64_t> source = read_ints(file.openDataSet("source"));
  const std::vector<int64_t> inputs = read_ints(file.openDataSet("inputs"));
  EXPECT_EQ(source, (std::vector<int64_t>{4, 3, 2, 1}));
  for (const char* layer : {"decoder_cross_layer_0", "decoder_cross_layer_1"}) {
    expect_attention(file, layer, 4, 4, false);
    const H5::DataSet set = file.openDataSet(layer);
    EXPECT_EQ(read_ints(set.openAttribute("query_tokens")), inputs) << layer;
    EXPECT_EQ(read_ints(set.openAttribute("key_tokens")), source) << layer;
  }
  EXPECT_FALSE(file.nameExists("decoder_cross_layer_2"));
  EXPECT_FALSE(file.nameExists("layer_0"));
}

// ---------------------------------------------------------------------------------------------
// explain and gradcheck.

TEST_F(CliTest, ExplainReproducesTheSeedNumbers) {
  const CommandResult r = run_gradlab({"explain"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (const char* number : {"0.4011", "0.1978", "0.5035", "0.8022", "0.7517"}) {
    EXPECT_TRUE(contains(r.out, number)) << number << " missing from\n" << r.out;
  }
}

TEST_F(CliTest, ExplainShapesPrintsTheWalkAndParameterCount) {
  const CommandResult r = run_gradlab({"explain", "--shapes", "2,4,8,2"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "[2,2,4,4]")) << r.out;  // [B, H, T, D]
  EXPECT_TRUE(contains(r.out, "total 288")) << r.out;  // 4 C^2 + 4 C with C = 8
}

TEST_F(CliTest, ExplainShapesRejectsIndivisibleHeadsAndBadLists) {
  CommandResult r = run_gradlab({"explain", "--shapes", "2,4,8,3"});
  expect_usage_error(r, "explain");
  EXPECT_TRUE(contains(first_line(r.err), "divisible")) << r.err;
  EXPECT_TRUE(contains(first_line(r.err), "8")) << r.err;
  EXPECT_TRUE(contains(first_line(r.err), "3")) << r.err;
  for (const char* bad : {"2,4,8", "2,4,x,2", "2,4,0,2", "2,4,8,2,2,2"}) {
    SCOPED_TRACE(bad);
    expect_usage_error(run_gradlab({"explain", "--shapes", bad}), "explain");
  }
}

TEST_F(CliTest, GradcheckOneOpPasses) {
  const CommandResult r = run_gradlab({"gradcheck", "--op", "matmul"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "matmul")) << r.out;
  EXPECT_TRUE(contains(r.out, "PASS")) << r.out;
  EXPECT_FALSE(contains(r.out, "FAIL")) << r.out;
}

TEST_F(CliTest, GradcheckUnknownOpIsAUsageError) {
  const CommandResult r = run_gradlab({"gradcheck", "--op", "nosuchop"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_TRUE(contains(first_line(r.err), "nosuchop")) << r.err;
  EXPECT_TRUE(contains(r.err, "Options:")) << r.err;
}

// ---------------------------------------------------------------------------------------------
// Resume.

TEST_F(CliCheckpointTest, ResumeRejectsAChangedStructuralFlag) {
  TempDir tmp;
  for (const std::vector<std::string>& changed : {std::vector<std::string>{"--d-model", "32"},
                                                  {"--heads", "2"},
                                                  {"--task", "reverse"},
                                                  {"--lr", "0.01"},
                                                  {"--seed", "5"}}) {
    SCOPED_TRACE(changed[0]);
    const CommandResult r =
        run_gradlab(with({"train", "--resume", trained_, "--out", tmp.file("never")}, changed));
    expect_usage_error(r, "train");
    EXPECT_TRUE(contains(first_line(r.err), changed[0])) << r.err;
    EXPECT_TRUE(contains(first_line(r.err), "resume")) << r.err;
  }
  EXPECT_FALSE(fs::exists(tmp.file("never")));
}

TEST_F(CliCheckpointTest, ResumeAllowsMoreSteps) {
  TempDir tmp;
  const int64_t step = read_checkpoint(trained_).train.step;
  const std::string out = tmp.file("more");
  const CommandResult r =
      run_gradlab({"train", "--resume", trained_, "--steps", std::to_string(step + 5),
                   "--target-accuracy", "0", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "Trained 5 steps")) << r.out;
  const std::string final_path = after(r.out, "Checkpoint: ");
  EXPECT_EQ(fs::path(final_path).parent_path(), fs::path(out));
  EXPECT_EQ(read_checkpoint(final_path).train.step, step + 5);
}

// Resuming with --steps at or below the checkpoint's step trains nothing, yet `gradlab train`
// prints "Trained 0 steps ...: held-out loss 0.0000, token accuracy 0.00%, exact match 0.00%"
// (run_train reports final_metrics, which is only set by an evaluation inside the loop), and,
// because last_saved is empty, it saves over the very checkpoint it resumed from, now with
// /config/steps replaced by the smaller value (config.ini is rewritten too). Expected: either a
// usage error naming both step counts, or a no-op that leaves the checkpoint alone and does not
// report metrics it never computed. Disabled until cmd_train.cpp handles this case.
TEST_F(CliCheckpointTest, ResumeWithNoStepsLeftReportsNoFakeMetricsAndKeepsTheFile) {
  TempDir tmp;
  const int64_t step = read_checkpoint(trained_).train.step;
  char name[32];
  std::snprintf(name, sizeof name, "step-%06lld.h5", static_cast<long long>(step));
  const std::string copy = tmp.file(name);
  fs::copy_file(trained_, copy);
  const std::string before = read_text(copy);
  const CommandResult r =
      run_gradlab({"train", "--resume", copy, "--steps", std::to_string(step / 2)});
  EXPECT_FALSE(contains(r.out, "held-out loss 0.0000")) << r.describe();
  EXPECT_TRUE(read_text(copy) == before) << "the checkpoint resumed from was rewritten";
  EXPECT_EQ(read_checkpoint(copy).train.step, step);
  auto steps_of = [](const std::string& path) {
    for (const auto& [key, value] : read_checkpoint_config(path)) {
      if (key == "steps") return to_string(value);
    }
    return std::string("missing");
  };
  EXPECT_EQ(steps_of(copy), steps_of(trained_)) << "/config/steps of the checkpoint changed";
}

TEST_F(CliTest, ResumeFromAMissingFileIsARuntimeFailure) {
  TempDir tmp;
  const std::string missing = tmp.file("missing.h5");
  const CommandResult r = run_gradlab({"train", "--resume", missing, "--steps", "5"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(contains(r.err, missing)) << r.err;
}

// ---------------------------------------------------------------------------------------------
// Signals.

TEST_F(CliTest, InterruptSavesAResumableCheckpoint) {
  for (const int signal : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(signal == SIGINT ? "SIGINT" : "SIGTERM");
    TempDir tmp;
    RunOptions options;
    options.signal = signal;
    options.signal_after_output = "step 10/";  // the first evaluation line
    options.signal_after_ms = 3000;            // in case the output changes
    options.timeout_ms = 60000;
    const CommandResult r = run_gradlab(with({"train", "--steps", "100000", "--eval-every", "10",
                                              "--target-accuracy", "0", "--out", tmp.file("run")},
                                             kSmall),
                                        options);
    ASSERT_TRUE(r.signal_sent) << r.describe();
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_TRUE(contains(r.out, "Interrupted after step")) << r.out;
    const std::string resume = after(r.out, "Resume with: gradlab train --resume ");
    ASSERT_FALSE(resume.empty()) << r.out;
    ASSERT_TRUE(fs::exists(resume)) << resume;
    const int64_t step = std::stoll(after(r.out, "Interrupted after step "));
    EXPECT_GE(step, 10);
    EXPECT_EQ(read_checkpoint(resume).train.step, step);

    const CommandResult eval = run_gradlab({"eval", "--checkpoint", resume});
    EXPECT_EQ(eval.exit_code, 0) << eval.describe();
    EXPECT_TRUE(contains(eval.out, "step " + std::to_string(step))) << eval.out;
  }
}

// ---------------------------------------------------------------------------------------------
// The run directory.

constexpr const char* kMetricsHeader =
    "step,train_loss,eval_loss,token_accuracy,exact_match,grad_norm,lr,tokens_per_second,"
    "elapsed_seconds,eval_bits_per_token";

// The first data row of metrics.csv without the timing columns.
std::string first_metrics_row(const fs::path& csv) {
  const std::vector<std::string> rows = lines(read_text(csv));
  if (rows.size() < 2) return "";
  std::string kept;
  std::istringstream fields(rows[1]);
  std::string field;
  for (int i = 0; i < 7 && std::getline(fields, field, ','); ++i) kept += field + ",";
  return kept;
}

TEST_F(CliTest, RunDirectoryHoldsReusableConfigMetricsAndBest) {
  TempDir tmp;
  const fs::path run = tmp.path() / "run";
  CommandResult r =
      run_gradlab(with({"train", "--steps", "4", "--eval-every", "1", "--target-accuracy", "0",
                        "--dropout", "0.1", "--out", run.string()},
                       kSmall));
  ASSERT_EQ(r.exit_code, 0) << r.describe();

  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(run)) {
    names.insert(entry.path().filename().string());
  }
  EXPECT_TRUE(names.count("config.ini"));
  EXPECT_TRUE(names.count("metrics.csv"));
  EXPECT_TRUE(names.count("best.h5"));
  EXPECT_TRUE(names.count("step-000004.h5"));
  for (const std::string& name : names) {
    EXPECT_FALSE(contains(name, ".tmp")) << "leftover temporary file " << name;
  }

  const std::vector<std::string> csv = lines(read_text(run / "metrics.csv"));
  ASSERT_EQ(csv.size(), 5u);  // header and steps 1..4
  EXPECT_EQ(csv[0], kMetricsHeader);
  for (size_t i = 1; i < csv.size(); ++i) {
    EXPECT_TRUE(csv[i].starts_with(std::to_string(i) + ",")) << csv[i];
    EXPECT_EQ(std::count(csv[i].begin(), csv[i].end(), ','), 9) << csv[i];
  }
  const CommandResult best = run_gradlab({"eval", "--checkpoint", (run / "best.h5").string()});
  EXPECT_EQ(best.exit_code, 0) << best.describe();

  // The same run from its config.ini (flags win over the file) starts identically.
  const fs::path again = tmp.path() / "again";
  r = run_gradlab({"train", "--config", (run / "config.ini").string(), "--steps", "2", "--out",
                   again.string()});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(first_metrics_row(again / "metrics.csv"), first_metrics_row(run / "metrics.csv"));
  EXPECT_FALSE(first_metrics_row(run / "metrics.csv").empty());
  // Its config.ini differs only in the steps line.
  std::vector<std::string> a = lines(read_text(run / "config.ini"));
  std::vector<std::string> b = lines(read_text(again / "config.ini"));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].starts_with("steps = ")) {
      EXPECT_EQ(b[i], "steps = 2");
    } else {
      EXPECT_EQ(b[i], a[i]);
    }
  }
}

TEST_F(CliTest, KeepLeavesOnlyTheNewestStepCheckpoints) {
  TempDir tmp;
  const fs::path run = tmp.path() / "run";
  const CommandResult r = run_gradlab(with({"train", "--steps", "20", "--save-every", "5", "--keep",
                                            "2", "--target-accuracy", "0", "--out", run.string()},
                                           kSmall));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  std::set<std::string> checkpoints;
  for (const auto& entry : fs::directory_iterator(run)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".h5")) checkpoints.insert(name);
    EXPECT_FALSE(contains(name, ".tmp")) << "leftover temporary file " << name;
  }
  EXPECT_EQ(checkpoints, (std::set<std::string>{"best.h5", "step-000015.h5", "step-000020.h5"}));
}

}  // namespace test_cli
}  // namespace gradlab::train
