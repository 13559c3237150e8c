// Language modelling through the command line: train on a text file, resume bit for bit,
// evaluate on any text, sample from the checkpoint alone, and every bad text input named.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/cli_runner.h"
#include "tests/test_helpers.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/fit.h"

namespace gradlab::train {
namespace test_text_cli {

using testing::with;

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::contains;
using testing::read_text;
using testing::run_gradlab;
using testing::TempDir;

// A few kilobytes of English-like text with a handful of non-ASCII characters.
std::string some_text() {
  std::string text;
  const char* words[] = {"the ", "cat ",   "sat ", "on ",
                         "a ",   "mat, ",  "and ", "\xC3\xA9t\xC3\xA9 ",
                         "was ", "warm.\n"};
  for (int i = 0; i < 900; ++i) text += words[(i * 7 + i / 3) % 10];
  return text;
}

std::string write(TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::vector<std::string> text_flags(const std::string& data) {
  return {"--task",       "text", "--data",       data, "--context", "16", "--d-model",    "24",
          "--heads",      "2",    "--layers",     "1",  "--d-ff",    "32", "--batch-size", "8",
          "--eval-iters", "16",   "--eval-every", "10"};
}

// Characters of UTF-8 text: the bytes that are not continuation bytes.
size_t code_points(const std::string& text) {
  size_t count = 0;
  for (char c : text) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

TEST(TextCli, TrainsEvaluatesAndSamplesFromTheCheckpointAlone) {
  TempDir dir;
  const std::string data = write(dir, "corpus.txt", some_text());
  const std::string run = dir.file("run");
  CommandResult r = run_gradlab(with({"train", "--steps", "60", "--out", run}, text_flags(data)));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "bits/token")) << r.out;
  const CheckpointData saved = read_checkpoint(run + "/step-000060.h5");
  bool has_vocabulary = false;
  for (const auto& [key, value] : saved.config) {
    if (key == "vocabulary") {
      has_vocabulary = true;
      EXPECT_EQ(std::get<std::string>(value), "\n ,.acdehmnorstw\xC3\xA9") << "sorted code points";
    }
  }
  EXPECT_TRUE(has_vocabulary);

  // The held-out loss fell well below the unigram entropy of the text (2.4 nats).
  r = run_gradlab({"eval", "--checkpoint", run + "/best.h5"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "bits per character")) << r.out;
  const double loss = std::stod(r.out.substr(r.out.find("loss ") + 5));
  EXPECT_LT(loss, 1.5) << r.out;

  // Another text in the same alphabet; then one with a character the model never saw.
  const std::string other = write(dir, "other.txt", "the mat was warm, and the cat sat.\n");
  r = run_gradlab({"eval", "--checkpoint", run + "/best.h5", "--data", other});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  const std::string foreign = write(dir, "foreign.txt", "the cat sat on the dog.\n");
  r = run_gradlab({"eval", "--checkpoint", run + "/best.h5", "--data", foreign});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(contains(r.err, foreign + ": character 'g' (U+0067) at byte 21")) << r.err;

  // Sampling needs no data file: the vocabulary is in the checkpoint.
  fs::remove(data);
  r = run_gradlab({"sample", "--checkpoint", run + "/best.h5", "--prompt", "the ", "--tokens", "40",
                   "--seed", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(r.out.starts_with("the ")) << r.out;
  EXPECT_EQ(code_points(r.out), 4 + 40 + 1) << "the prompt, 40 characters and a newline";
  const CommandResult greedy_a = run_gradlab(
      {"sample", "--checkpoint", run + "/best.h5", "--temperature", "0", "--seed", "1"});
  const CommandResult greedy_b = run_gradlab(
      {"sample", "--checkpoint", run + "/best.h5", "--temperature", "0", "--seed", "2"});
  EXPECT_EQ(greedy_a.out, greedy_b.out) << "greedy decoding does not depend on the seed";
  r = run_gradlab({"sample", "--checkpoint", run + "/best.h5", "--prompt", "dog"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_TRUE(contains(r.err, "--prompt: character 'g' (U+0067)")) << r.err;
}

TEST(TextCli, AResumedRunIsBitIdenticalToAnUninterruptedOne) {
  TempDir dir;
  const std::string data = write(dir, "corpus.txt", some_text());
  const std::string split = dir.file("split"), straight = dir.file("straight");
  // The GPT-style options too: they must save, load and resume like everything else.
  const std::vector<std::string> flags =
      with(text_flags(data), {"--dropout", "0.1", "--bias", "0", "--tie-embeddings", "1", "--init",
                              "gpt2", "--kv-heads", "1"});
  CommandResult r = run_gradlab(with({"train", "--steps", "30", "--out", split}, flags));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  r = run_gradlab({"train", "--resume", split + "/step-000030.h5", "--steps", "60"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  r = run_gradlab(with({"train", "--steps", "60", "--out", straight}, flags));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const CheckpointData a = read_checkpoint(split + "/step-000060.h5");
  const CheckpointData b = read_checkpoint(straight + "/step-000060.h5");
  for (const auto& [name, tensor] : a.model) {
    EXPECT_FALSE(name.ends_with(".bias")) << name << " exists with --bias 0";
    EXPECT_FALSE(name.starts_with("head.")) << name << " exists with tied embeddings";
  }
  ASSERT_EQ(a.model.size(), b.model.size());
  for (size_t i = 0; i < a.model.size(); ++i) {
    EXPECT_EQ(a.model[i].second.to_vector(), b.model[i].second.to_vector()) << a.model[i].first;
  }
  EXPECT_EQ(a.train.dropout_rng, b.train.dropout_rng);
}

TEST(TextCli, BadTextInputsNameTheFile) {
  TempDir dir;
  int runs = 0;  // each run writes a directory of its own
  const auto train_on = [&](const std::string& data, std::vector<std::string> more = {}) {
    const std::string out = dir.file("run-") + std::to_string(runs++);
    return run_gradlab(with(with({"train", "--steps", "2", "--out", out}, text_flags(data)), more));
  };
  const struct {
    std::string path, expected;
  } cases[] = {
      {dir.file("missing.txt"), "missing.txt: no such file"},
      {dir.path().string(), "not a regular file (a directory)"},
      {write(dir, "empty.txt", ""), "empty.txt: is empty"},
      {write(dir, "latin1.txt", "caf\xE9 au lait\n"), "invalid UTF-8 at byte 3"},
      {write(dir, "short.txt", std::string(100, 'x')), "the validation split has 10 tokens"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.path);
    const CommandResult r = train_on(c.path);
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_TRUE(contains(r.err, c.expected)) << r.err;
  }
  // Any file trains byte by byte.
  const CommandResult bytes =
      train_on(write(dir, "latin1-long.txt", std::string(300, '\xE9')), {"--tokenizer", "byte"});
  EXPECT_EQ(bytes.exit_code, 0) << bytes.describe();
  const CommandResult seq2seq = train_on(write(dir, "ok.txt", some_text()), {"--model", "seq2seq"});
  EXPECT_EQ(seq2seq.exit_code, 2) << seq2seq.describe();
  EXPECT_TRUE(contains(seq2seq.err, "--model")) << seq2seq.err;
  // A bad flag is found before the text is read (a large file takes seconds to read).
  const CommandResult bad_flag = train_on(dir.file("missing.txt"), {"--lr", "-1"});
  EXPECT_EQ(bad_flag.exit_code, 2) << bad_flag.describe();
  EXPECT_TRUE(contains(bad_flag.err, "lr must be finite and > 0, got -1")) << bad_flag.err;
  EXPECT_FALSE(contains(bad_flag.err, "no such file")) << bad_flag.err;
  const CommandResult no_data = run_gradlab({"train", "--task", "text"});
  EXPECT_EQ(no_data.exit_code, 2);
  EXPECT_TRUE(contains(no_data.err, "--data")) << no_data.err;
}

}  // namespace test_text_cli
}  // namespace gradlab::train
