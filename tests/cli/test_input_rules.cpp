// The rules every command applies to what it is given, by class of input: a text that a
// checkpoint cannot store, a checkpoint whose vocabulary does not fit its tensors, a message
// that quotes a control character, a non-finite number, a special file as --data, an option of
// another task, an --out that would overwrite a file. Each used to hold for one command and not
// another; these tests give each rule every command it concerns.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "cli/command_table.h"
#include "tests/cli_runner.h"
#include "tests/test_helpers.h"
#include "train/checkpoint.h"
#include "train/trained_model.h"

namespace gradlab::train {
namespace test_input_rules {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::contains;
using testing::expect_runtime_failure;
using testing::expect_usage_error;
using testing::first_line;
using testing::kTiny;
using testing::run_gradlab;
using testing::TempDir;
using testing::with;

// The smallest language model's flags, but its data and the run directory.
const std::vector<std::string> kTinyTextRun = {
    "train", "--task",   "text", "--context",    "8", "--d-model",    "8", "--heads",
    "2",     "--layers", "1",    "--d-ff",       "8", "--batch-size", "2", "--eval-iters",
    "2",     "--steps",  "2",    "--eval-every", "1"};

// A copy-task checkpoint and a character-level language model, trained once for the suite.
class InputRules : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<TempDir>();
    const CommandResult r = run_gradlab(with({"train", "--out", dir_->file("copy")}, kTiny));
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    toy_ = dir_->file("copy") + "/step-000002.h5";
    text_ = testing::tiny_text_model();
    text_file_ = testing::tiny_text_data();
  }
  static void TearDownTestSuite() { dir_.reset(); }
  void SetUp() override {
    ASSERT_TRUE(fs::exists(toy_) && fs::exists(text_)) << "the shared runs failed";
  }

  // The text checkpoint with its stored vocabulary replaced by edit(vocabulary).
  static std::string forged_vocabulary(const TempDir& tmp, const std::string& name,
                                       const std::function<std::string(std::string)>& edit) {
    CheckpointData data = read_checkpoint(text_);
    for (auto& [key, value] : data.config) {
      if (key == "vocabulary") value = edit(std::get<std::string>(value));
    }
    const std::string path = tmp.file(name);
    save_checkpoint(path, data);
    return path;
  }

  static std::unique_ptr<TempDir> dir_;
  static std::string toy_, text_, text_file_;
};

std::unique_ptr<TempDir> InputRules::dir_;
std::string InputRules::toy_;
std::string InputRules::text_;
std::string InputRules::text_file_;

// ---------------------------------------------------------------------------------------------
// What can be trained can be saved

// A UTF-16 file read with --tokenizer char is full of NULs, which the vocabulary string of a
// checkpoint cannot hold: the run used to train to the end and then fail to write best.h5.
TEST_F(InputRules, ATextHoldingNulIsRefusedBeforeTheFirstStep) {
  TempDir tmp;
  const std::string utf16 = tmp.file("utf16.txt");
  {
    std::ofstream out(utf16, std::ios::binary);
    for (int i = 0; i < 200; ++i) out << std::string("h\0i\0 \0", 6);
  }
  const std::vector<std::string> text = with(kTinyTextRun, {"--data", utf16});
  expect_usage_error(run_gradlab(with(text, {"--out", tmp.file("never")})), "train",
                     {utf16, "U+0000", "--tokenizer byte"});
  EXPECT_FALSE(fs::exists(tmp.file("never")));
  // The byte tokenizer reads it, and its checkpoint saves.
  const std::vector<std::string> byte = {"--tokenizer", "byte", "--out", tmp.file("bytes")};
  const CommandResult r = run_gradlab(with(text, byte));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(fs::exists(tmp.file("bytes") + "/best.h5"));
}

// ---------------------------------------------------------------------------------------------
// A checkpoint's vocabulary is checked, not repaired

// Re-sorting a stored vocabulary would give every token id another character.
TEST_F(InputRules, AStoredVocabularyOutOfOrderIsRefusedByEveryReader) {
  TempDir tmp;
  const std::string swapped = forged_vocabulary(tmp, "swapped.h5", [](std::string v) {
    std::swap(v[1], v[2]);
    return v;
  });
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"eval", "--checkpoint", swapped},
        {"sample", "--checkpoint", swapped, "--prompt", "the", "--tokens", "2"},
        {"train", "--resume", swapped, "--steps", "40"}}) {
    SCOPED_TRACE(args[0]);
    expect_runtime_failure(run_gradlab(args), args[0], {swapped, "char vocabulary", "comes after"});
  }
  // inspect shows the file as stored, the vocabulary on one line.
  const CommandResult inspect = run_gradlab({"inspect", swapped});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.describe();
  EXPECT_TRUE(contains(inspect.out, "  vocabulary         \\n. ")) << inspect.out;
  const std::string doubled = forged_vocabulary(tmp, "doubled.h5", [](std::string v) {
    v[2] = v[1];
    return v;
  });
  expect_runtime_failure(run_gradlab({"eval", "--checkpoint", doubled}), "eval",
                         {doubled, "appears twice"});
}

// One character fewer than the embedding's rows: the checkpoint is inconsistent, whichever data
// file a command reads (it used to blame the data file's last character).
TEST_F(InputRules, AVocabularyShorterThanTheEmbeddingNamesTheCheckpoint) {
  TempDir tmp;
  const std::string short_one =
      forged_vocabulary(tmp, "short.h5", [](std::string v) { return v.substr(0, v.size() - 1); });
  const std::vector<std::string> named = {short_one, "inconsistent", "/model/"};
  expect_runtime_failure(run_gradlab({"eval", "--checkpoint", short_one, "--data", text_file_}),
                         "eval", named);
  expect_runtime_failure(run_gradlab({"eval", "--checkpoint", short_one}), "eval", named);
  expect_runtime_failure(run_gradlab({"sample", "--checkpoint", short_one, "--prompt", "the"}),
                         "sample", named);
  expect_runtime_failure(run_gradlab({"ablate", "--checkpoint", short_one}), "ablate", named);
  expect_runtime_failure(run_gradlab({"train", "--resume", short_one, "--steps", "40"}), "train",
                         named);
}

// ---------------------------------------------------------------------------------------------
// Messages: one line, short, and a hint the command takes

TEST_F(InputRules, ControlCharactersInAMessageAreEscapedByEveryCommand) {
  // A newline in a path reaches the message through the checkpoint reader, not quote().
  const CommandResult eval = run_gradlab({"eval", "--checkpoint", "no\nsuch.h5"});
  EXPECT_EQ(eval.exit_code, 1) << eval.describe();
  EXPECT_EQ(eval.err.find('\n'), eval.err.size() - 1) << eval.err;
  const CommandResult data = run_gradlab({"eval", "--checkpoint", text_, "--data", "no\nfile"});
  EXPECT_EQ(data.exit_code, 1) << data.describe();
  EXPECT_TRUE(contains(data.err, "no\\nfile")) << data.err;
  EXPECT_EQ(data.err.find('\n'), data.err.size() - 1) << data.err;
  // A character the model's vocabulary lacks, quoted escaped.
  const CommandResult sample = run_gradlab({"sample", "--checkpoint", text_, "--prompt", "\t"});
  expect_usage_error(sample, "sample", {"--prompt", "'\\x09'"});
}

TEST_F(InputRules, SampleRefusesATopKAboveTheVocabulary) {
  const int64_t vocabulary = load_trained_model(text_).vocabulary->size();
  const std::string above = std::to_string(vocabulary + 1);
  expect_usage_error(
      run_gradlab({"sample", "--checkpoint", text_, "--top-k", above, "--tokens", "2"}), "sample",
      {"--top-k " + above, std::to_string(vocabulary) + " tokens of the model's vocabulary"});
  const std::string all = std::to_string(vocabulary);
  EXPECT_EQ(
      run_gradlab({"sample", "--checkpoint", text_, "--top-k", all, "--tokens", "2"}).exit_code, 0);
}

TEST_F(InputRules, ExplainRefusesAnEmptySizeInShapes) {
  for (const char* shapes : {"2,4,8,2,", ",2,4,8,2", "2,4,,8,2"}) {
    expect_usage_error(testing::parse_gradlab({"explain", "--shapes", shapes}), "explain",
                       {"--shapes '" + std::string(shapes) + "'", "an empty size"});
  }
  EXPECT_EQ(testing::parse_gradlab({"explain", "--shapes", "2,4,8,2"}).exit_code, -1);
}

TEST_F(InputRules, AnEmptyArgumentIsAShortUsageError) {
  TempDir tmp;
  const CommandResult r = run_gradlab({"train", "", "--out", tmp.file("never")});
  expect_usage_error(r, "train", {"''"});
  EXPECT_LT(first_line(r.err).size(), 120u) << first_line(r.err);
  const CommandResult ambiguous = run_gradlab({"train", "--e", "1", "--out", tmp.file("never")});
  expect_usage_error(ambiguous, "train", {"'--e' is ambiguous", "--eps", "more"});
  EXPECT_LT(first_line(ambiguous.err).size(), 160u) << first_line(ambiguous.err);
}

// The hint for invalid UTF-8 names what the command can do: train can switch tokenizers, eval
// reads with the model's.
TEST_F(InputRules, TheInvalidUtf8HintFitsTheCommand) {
  TempDir tmp;
  const std::string latin1 = tmp.file("latin1.txt");
  std::ofstream(latin1, std::ios::binary) << "the cat \xe9t\xe9\n";
  const CommandResult eval = run_gradlab({"eval", "--checkpoint", text_, "--data", latin1});
  EXPECT_EQ(eval.exit_code, 1) << eval.describe();
  EXPECT_TRUE(contains(eval.err, "invalid UTF-8 at byte 8")) << eval.err;
  EXPECT_FALSE(contains(eval.err, "--tokenizer")) << eval.err;
  const CommandResult train =
      run_gradlab(with(kTinyTextRun, {"--data", latin1, "--out", tmp.file("never")}));
  expect_usage_error(train, "train", {"invalid UTF-8", "--tokenizer byte"});
}

// ---------------------------------------------------------------------------------------------
// Numbers and files: one rule for every command

TEST_F(InputRules, NonFiniteNumbersAreUsageErrorsForEveryFloatingPointFlag) {
  TempDir tmp;
  for (const std::string value : {"inf", "nan", "-inf"}) {
    SCOPED_TRACE(value);
    expect_usage_error(
        run_gradlab({"sample", "--checkpoint", text_, "--temperature", value, "--tokens", "1"}),
        "sample", {"--temperature must be a finite number"});
    expect_usage_error(run_gradlab({"activations", "--checkpoint", toy_, "--input", "1 2", "--out",
                                    tmp.file("never.h5"), "--max-memory", value}),
                       "activations", {"--max-memory must be a finite number"});
  }
  expect_usage_error(run_gradlab({"sample", "--checkpoint", text_, "--temperature", "-1"}),
                     "sample", {"--temperature must not be negative, got -1"});
  EXPECT_FALSE(fs::exists(tmp.file("never.h5")));
}

TEST_F(InputRules, ADataFileThatIsNotARegularFileIsAUsageErrorForEveryCommand) {
  TempDir tmp;
  const std::string fifo = tmp.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  testing::RunOptions quick;
  quick.timeout_ms = 30000;
  for (const std::string& special : {fifo, tmp.path().string()}) {
    SCOPED_TRACE(special);
    expect_usage_error(run_gradlab({"eval", "--checkpoint", text_, "--data", special}, quick),
                       "eval", {"--data", special, "not a regular file"});
    expect_usage_error(run_gradlab({"ablate", "--checkpoint", text_, "--data", special}, quick),
                       "ablate", {"--data", special, "not a regular file"});
    expect_usage_error(
        run_gradlab(with(kTinyTextRun, {"--data", special, "--out", tmp.file("never")}), quick),
        "train", {"--data", special, "not a regular file"});
  }
}

// --data scores a language model on a file; a toy task has none to read.
TEST_F(InputRules, DataOnAToyTaskCheckpointIsAUsageErrorNamingTheTask) {
  for (const std::string command : {"eval", "ablate"}) {
    SCOPED_TRACE(command);
    expect_usage_error(run_gradlab({command, "--checkpoint", toy_, "--data", text_file_}), command,
                       {"--data", "task copy"});
  }
  expect_usage_error(run_gradlab({"patch", "--checkpoint", toy_, "--clean", "1 2", "--corrupt",
                                  "2 1", "--data", text_file_}),
                     "patch", {"--data"});
}

// ---------------------------------------------------------------------------------------------
// A task's options, and nothing else

TEST_F(InputRules, AnOptionOfAnotherTaskIsRefusedNamingTheTasks) {
  TempDir tmp;
  const std::vector<std::string> train = with({"train", "--out", tmp.file("never")}, kTiny);
  const std::vector<std::string> model = {"train", "--out", tmp.file("never"), "--d-model", "8"};
  expect_usage_error(run_gradlab(with(train, {"--data", text_file_})), "train",
                     {"--data", "--task text", "not of copy"});
  expect_usage_error(run_gradlab(with(train, {"--tokenizer", "byte"})), "train",
                     {"--tokenizer", "not of copy"});
  expect_usage_error(run_gradlab(with(train, {"--modulus", "7"})), "train",
                     {"--modulus", "--task modular", "not of copy"});
  expect_usage_error(run_gradlab(with(model, {"--task", "modular", "--length", "3"})), "train",
                     {"--length", "not of modular", "--modulus"});
  expect_usage_error(run_gradlab(with(model, {"--task", "mqar", "--val-fraction", "0.2"})), "train",
                     {"--val-fraction", "not of mqar"});
  // A line of a config file too, unless it holds the option's default (older config.ini files
  // list every task's options at their defaults).
  const std::string config = tmp.file("copy.ini");
  std::ofstream(config) << "task = copy\nmodulus = 7\n";
  expect_usage_error(run_gradlab(with(train, {"--config", config})), "train",
                     {config, "modulus", "not of copy"});
  const std::string old = tmp.file("old.ini");
  std::ofstream(old) << "task = copy\nmodulus = 113\ndata = \ntokenizer = char\n";
  const CommandResult r =
      run_gradlab(with(with({"train", "--out", tmp.file("old")}, kTiny), {"--config", old}));
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  // On --resume the checkpoint's task decides.
  expect_usage_error(run_gradlab({"train", "--resume", toy_, "--steps", "4", "--data", text_file_}),
                     "train", {"--data", "not of copy"});
  EXPECT_FALSE(fs::exists(tmp.file("never")));
}

// Every shipped configuration holds only its task's options, and is accepted as it stands.
TEST_F(InputRules, EveryConfigFileIsAccepted) {
  const fs::path configs =
      fs::path(GRADLAB_TEST_FIXTURES_DIR).parent_path().parent_path() / "configs";
  int seen = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(configs)) {
    if (entry.path().extension() != ".ini") continue;
    ++seen;
    SCOPED_TRACE(entry.path().string());
    TempDir tmp;
    std::vector<std::string> args = {"--config", entry.path().string(), "--out", tmp.file("run")};
    std::ifstream in(entry.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (contains(text, "task = text")) args = with(args, {"--data", text_file_});
    EXPECT_EQ(cli::find_command("train")->parse(args), -1);
  }
  EXPECT_GE(seen, 9);
}

// Sizes a task cannot be made with are usage errors naming the flag.
TEST_F(InputRules, ImpossibleTaskSizesAreUsageErrorsNamingTheFlag) {
  TempDir tmp;
  const std::vector<std::string> train = {"train", "--out", tmp.file("never")};
  expect_usage_error(run_gradlab(with(train, {"--task", "modular", "--modulus", "1"})), "train",
                     {"--modulus", "got 1"});
  for (const std::string fraction : {"0", "1"}) {
    expect_usage_error(run_gradlab(with(train, {"--task", "modular", "--modulus", "7",
                                                "--train-fraction", fraction})),
                       "train", {"--train-fraction", "got " + fraction});
  }
  expect_usage_error(
      run_gradlab(with(train, {"--task", "mqar", "--pairs", "40", "--context", "64"})), "train",
      {"--pairs 40", "--context 64"});
  EXPECT_FALSE(fs::exists(tmp.file("never")));
}

// ---------------------------------------------------------------------------------------------
// Files written with --out

TEST_F(InputRules, NoCommandOverwritesAFileWithoutOverwriteNorACheckpointEver) {
  TempDir tmp;
  const std::string existing = tmp.file("existing.h5");
  std::ofstream(existing) << "keep me";
  const std::vector<std::vector<std::string>> commands = {
      {"activations", "--checkpoint", toy_, "--input", "1 2"},
      {"ablate", "--checkpoint", toy_},
      {"patch", "--checkpoint", toy_, "--clean", "1 2", "--corrupt", "2 1"},
      {"attention", "--checkpoint", toy_, "--input", "1 2"},
  };
  for (const std::vector<std::string>& args : commands) {
    SCOPED_TRACE(args[0]);
    expect_usage_error(run_gradlab(with(args, {"--out", existing})), args[0],
                       {existing, "--overwrite"});
    // Another checkpoint, even with --overwrite.
    expect_usage_error(run_gradlab(with(args, {"--out", text_, "--overwrite"})), args[0],
                       {text_, "checkpoint"});
    expect_usage_error(run_gradlab(with(args, {"--out", toy_, "--overwrite"})), args[0],
                       {toy_, "checkpoint"});
  }
  EXPECT_EQ(testing::read_text(existing), "keep me");
}

}  // namespace test_input_rules
}  // namespace gradlab::train
