// Text as tokens: both tokenizers on real bytes (multi-byte characters across the reader's block
// boundary included), the compact token storage, every bad file named in its error, and the
// windows: a pure function of (seed, step), inside their split, the validation set fixed.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "data/text.h"
#include "tests/cli_runner.h"
#include "tests/test_helpers.h"

namespace gradlab::data {
namespace test_text {

using testing::contains;
using testing::TempDir;

std::string write(TempDir& dir, const std::string& name, const std::string& bytes) {
  const std::string path = dir.file(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

// All tokens of the corpus, read back through windows covering the whole file.
std::string decoded(const TextCorpus& corpus, const std::vector<int64_t>& tokens) {
  std::string text;
  for (int64_t t : tokens) text += corpus.vocabulary().decode(t);
  return text;
}

TEST(Text, CharVocabularyIsTheSortedDistinctCodePoints) {
  TempDir dir;
  const std::string text =
      "b\xC3\xA9"
      "a\xE6\x97\xA5"
      "b\xF0\x9F\x99\x82"
      "a";  // bé a日 b🙂 a
  const TextCorpus corpus(write(dir, "t.txt", text), "char", 0.5);
  const Vocabulary& v = corpus.vocabulary();
  ASSERT_EQ(v.size(), 5);
  EXPECT_EQ(v.decode(0), "a");
  EXPECT_EQ(v.decode(1), "b");
  EXPECT_EQ(v.decode(2), "\xC3\xA9");
  EXPECT_EQ(v.decode(3), "\xE6\x97\xA5");
  EXPECT_EQ(v.decode(4), "\xF0\x9F\x99\x82");
  EXPECT_EQ(corpus.size(), 7);
  EXPECT_EQ(v.encode(text), (std::vector<int64_t>{1, 2, 0, 3, 1, 4, 0}));
  EXPECT_EQ(corpus.bytes_per_token(), 1);
  const Vocabulary again = Vocabulary::deserialize(v.kind(), v.serialize());
  EXPECT_EQ(again.encode(text), v.encode(text));
}

TEST(Text, ByteTokenizerTakesAnyFile) {
  TempDir dir;
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes += static_cast<char>(255 - i);
  const TextCorpus corpus(write(dir, "b.bin", bytes), "byte", 0.25);
  EXPECT_EQ(corpus.vocabulary().size(), 256);
  EXPECT_EQ(corpus.size(), 256);
  EXPECT_EQ(corpus.train_size(), 192);
  const Indices all = corpus.training_windows(0, 0, 1, 0);  // a window of one token
  EXPECT_EQ(all.shape, (Shape{1, 1}));
  EXPECT_EQ(decoded(corpus, corpus.vocabulary().encode(bytes)), bytes);
}

TEST(Text, MultiByteCharactersAcrossTheReadersBlocksAndWideVocabularies) {
  TempDir dir;
  // One ASCII byte, then 2-byte characters: every block boundary (1 MiB) splits one of them.
  // 300 distinct characters need two bytes per token.
  std::string text = "x";
  for (int i = 0; i < 600000; ++i) text += encode_utf8(0x100 + i % 300);
  const TextCorpus corpus(write(dir, "wide.txt", text), "char", 0.1);
  EXPECT_EQ(corpus.size(), 600001);
  EXPECT_EQ(corpus.vocabulary().size(), 301);
  EXPECT_EQ(corpus.bytes_per_token(), 2);
  const Indices w = corpus.validation_all(1000);
  std::vector<int64_t> tokens;
  for (int64_t r = 0; r < w.shape[0]; ++r) {
    tokens.insert(tokens.end(), w.values.begin() + r * 1001, w.values.begin() + r * 1001 + 1000);
  }
  const std::string expected =
      text.substr(text.size() - 2 * static_cast<size_t>(corpus.validation_size()));
  EXPECT_EQ(decoded(corpus, tokens), expected.substr(0, tokens.size() * 2));
}

TEST(Text, BadFilesAreNamedWithTheProblem) {
  TempDir dir;
  const std::string missing = dir.file("missing.txt");
  EXPECT_EQ(error_of([&] { TextCorpus(missing, "char", 0.1); }), missing + ": no such file");
  EXPECT_TRUE(
      contains(error_of([&] { TextCorpus(dir.path().string(), "char", 0.1); }), "is a directory"));
  const std::string empty = write(dir, "empty.txt", "");
  EXPECT_EQ(error_of([&] { TextCorpus(empty, "char", 0.1); }), empty + ": is empty");
  EXPECT_EQ(error_of([&] { TextCorpus(empty, "byte", 0.1); }), empty + ": is empty");
  const std::string bad = write(dir, "bad.txt",
                                "ab\xFF"
                                "cd");
  EXPECT_EQ(error_of([&] { TextCorpus(bad, "char", 0.1); }),
            bad + ": invalid UTF-8 at byte 2 (--tokenizer byte reads any file)");
  EXPECT_NO_THROW(TextCorpus(bad, "byte", 0.1));
  const std::string truncated = write(dir, "cut.txt", "abc\xE6\x97");
  EXPECT_TRUE(contains(error_of([&] { TextCorpus(truncated, "char", 0.1); }), "at byte 3"));
  const std::string overlong = write(dir, "overlong.txt", "a\xC0\xAF");
  EXPECT_TRUE(contains(error_of([&] { TextCorpus(overlong, "char", 0.1); }), "at byte 1"));
  const std::string ok = write(dir, "ok.txt", "hello");
  EXPECT_TRUE(contains(error_of([&] { TextCorpus(ok, "word", 0.1); }), "unknown tokenizer"));
  EXPECT_TRUE(contains(error_of([&] { TextCorpus(ok, "char", 1.0); }), "--val-fraction"));
}

TEST(Text, ShortSplitsNameTheSplitAndTheContext) {
  TempDir dir;
  const std::string path = write(dir, "short.txt", std::string(100, 'a'));
  const TextCorpus corpus(path, "char", 0.1);  // 90 training tokens, 10 validation
  EXPECT_NO_THROW(corpus.require_windows(9));
  const std::string error = error_of([&] { corpus.require_windows(10); });
  EXPECT_TRUE(contains(error, path + ": the validation split has 10 tokens")) << error;
  EXPECT_TRUE(contains(error, "--context + 1 = 11")) << error;
  EXPECT_TRUE(contains(error_of([&] { corpus.training_windows(0, 0, 2, 90); }), "training split"));
}

TEST(Text, WindowsAreAPureFunctionOfSeedAndStepAndStayInTheirSplit) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 5000; ++i) text += static_cast<char>('a' + (i * 7 + i / 26) % 26);
  const TextCorpus corpus(write(dir, "abc.txt", text), "char", 0.2);
  const std::vector<int64_t> all = corpus.vocabulary().encode(text);
  const int64_t length = 16, train = corpus.train_size();
  const Indices a = corpus.training_windows(3, 7, 12, length);
  EXPECT_EQ(a.shape, (Shape{12, length + 1}));
  EXPECT_EQ(corpus.training_windows(3, 7, 12, length).values, a.values);
  EXPECT_NE(corpus.training_windows(3, 8, 12, length).values, a.values);
  EXPECT_NE(corpus.training_windows(4, 7, 12, length).values, a.values);
  // Each row is a run of consecutive tokens of the training split.
  auto found_in = [&](const std::vector<int64_t>& row, int64_t begin, int64_t end) {
    for (int64_t s = begin; s + length + 1 <= end; ++s) {
      if (std::equal(row.begin(), row.end(), all.begin() + s)) return true;
    }
    return false;
  };
  for (int64_t r = 0; r < 12; ++r) {
    const std::vector<int64_t> row(a.values.begin() + r * (length + 1),
                                   a.values.begin() + (r + 1) * (length + 1));
    EXPECT_TRUE(found_in(row, 0, train)) << "row " << r;
  }
  const Indices v = corpus.validation_windows(3, 20, length);
  EXPECT_EQ(corpus.validation_windows(3, 20, length).values, v.values);
  for (int64_t r = 0; r < 20; ++r) {
    const std::vector<int64_t> row(v.values.begin() + r * (length + 1),
                                   v.values.begin() + (r + 1) * (length + 1));
    EXPECT_TRUE(found_in(row, train, corpus.size())) << "validation row " << r;
  }
  // Consecutive windows of the whole split: each predicts the tokens after its first.
  const Indices full = corpus.validation_all(length);
  EXPECT_EQ(full.shape[0], (corpus.validation_size() - 1) / length);
  for (int64_t r = 0; r < full.shape[0]; ++r) {
    EXPECT_EQ(full.values[r * (length + 1)], all[train + r * length]);
  }
}

TEST(Text, EncodeNamesACharacterOutsideTheVocabulary) {
  const Vocabulary v = Vocabulary::characters({U'a', U'b'});
  EXPECT_EQ(error_of([&] { v.encode("ab\xC3\xA9"); }),
            "character '\xC3\xA9' (U+00E9) is not in the model's vocabulary");
}

}  // namespace test_text
}  // namespace gradlab::data
