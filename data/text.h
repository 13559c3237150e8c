// A text file as tokens, for character- or byte-level language modelling.
//
// Tokenizers: `char` reads the file as UTF-8 and its vocabulary is the sorted set of distinct
// Unicode code points in it (token i is the i-th smallest); `byte` has the 256 byte values as
// its vocabulary and accepts any file. The vocabulary travels in the checkpoint
// (Vocabulary::serialize), so a trained model needs no data file to decode or sample.
//
// Memory: the file is streamed once in blocks; only the tokens are kept, one uint8, uint16 or
// uint32 each, the narrowest that holds the vocabulary (a 1 GB ASCII file: about 1 GB).
//
// Split and windows: the first (1 - val_fraction) of the tokens train, the rest validate. A
// training batch is batch_size windows of length + 1 tokens starting at uniform positions of
// the training split, drawn from a generator seeded by (seed, step): a pure function of both.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "autograd/error.h"
#include "autograd/indices.h"
#include "data/tokenizer.h"

namespace gradlab::data {

class Vocabulary {
 public:
  // Largest vocabulary the char tokenizer accepts: every code point Unicode has room for.
  static constexpr int64_t kMaxCharacters = 0x110000;

  static Vocabulary bytes();
  // The code points of tokens 0, 1, ...: the one check of a char vocabulary, for the tokenizer
  // and every checkpoint. Throws ConfigError unless they are distinct Unicode characters in
  // ascending order (a reordered vocabulary would give every token id another character) and
  // none is U+0000 (a checkpoint's /config stores the vocabulary as a string, which ends at a
  // NUL: a text holding one is refused before training, not at its first save).
  static Vocabulary characters(std::vector<char32_t> code_points);
  // Inverse of serialize(); throws ConfigError naming the problem (characters()).
  static Vocabulary deserialize(Tokenizer kind, const std::string& symbols);
  // The same with the tokenizer's name; throws ConfigError for an unknown one.
  static Vocabulary deserialize(const std::string& kind, const std::string& symbols);

  Tokenizer kind() const { return kind_; }
  int64_t size() const {
    return kind_ == Tokenizer::Byte ? 256 : static_cast<int64_t>(symbols_.size());
  }
  // The symbols as UTF-8 (char: the code points in token order; byte: empty).
  std::string serialize() const;
  const std::vector<char32_t>& code_points() const { return symbols_; }  // char only

  // Token ids of text. Throws ConfigError naming the first character that is not in the
  // vocabulary, or the byte offset of invalid UTF-8 (char).
  std::vector<int64_t> encode(std::string_view text) const;
  // The text of one token (char: its UTF-8 bytes; byte: the byte itself).
  std::string decode(int64_t token) const;

 private:
  Tokenizer kind_ = Tokenizer::Char;
  std::vector<char32_t> symbols_;  // char: code point of each token, ascending
};

// Bytes that are not UTF-8.
struct InvalidUtf8 : ConfigError {
  using ConfigError::ConfigError;
};

// Decodes the UTF-8 sequence at text[offset]; returns its code point and advances offset.
// Throws InvalidUtf8 naming the byte offset for an invalid or truncated sequence.
char32_t decode_utf8(std::string_view text, size_t& offset);
// The UTF-8 bytes of a code point.
std::string encode_utf8(char32_t code_point);

class TextCorpus {
 public:
  // Reads and tokenizes path. Throws ConfigError naming the file: missing, a directory,
  // unreadable, empty, invalid UTF-8 or a NUL character (char: where, and that --tokenizer byte
  // takes any file).
  TextCorpus(const std::string& path, const std::string& tokenizer, double val_fraction);
  // The same file read with a model's vocabulary (to resume or evaluate on any text); a
  // character outside it is an error naming the character and its byte offset.
  TextCorpus(const std::string& path, const Vocabulary& vocabulary, double val_fraction);

  const Vocabulary& vocabulary() const { return vocabulary_; }
  const std::string& path() const { return path_; }
  int64_t size() const;             // tokens in the file
  int64_t bytes_per_token() const;  // 1, 2 or 4: the narrowest that holds the vocabulary
  int64_t train_size() const { return train_size_; }
  int64_t validation_size() const { return size() - train_size_; }
  // The tokens as stored: size() of them, bytes_per_token() bytes each.
  std::string_view token_bytes() const;

  // Throws ConfigError naming the file and the split if either split is shorter than
  // length + 1 tokens.
  void require_windows(int64_t length) const;
  // Training batch `step` of stream `seed`: [batch_size, length + 1] windows of the training
  // split at uniform random offsets.
  Indices training_windows(uint64_t seed, int64_t step, int64_t batch_size, int64_t length) const;
  // count windows [count, length + 1] of the validation split at random offsets drawn from a
  // stream of `seed` that no training step uses: the same windows at every evaluation.
  Indices validation_windows(uint64_t seed, int64_t count, int64_t length) const;
  // The whole validation split as consecutive non-overlapping windows [N, length + 1] (each
  // window's last token is the next one's first, so every token is predicted once).
  Indices validation_all(int64_t length) const;
  // The whole file in the same consecutive windows. Throws ConfigError naming the file if it
  // is shorter than length + 1 tokens.
  Indices all_windows(int64_t length) const;

 private:
  TextCorpus(const std::string& path, Tokenizer tokenizer, const Vocabulary* fixed,
             double val_fraction);
  Indices windows(const std::vector<int64_t>& starts, int64_t length) const;
  // Windows from `begin` to the end of the file, each starting at the last token of the one
  // before.
  Indices consecutive_windows(int64_t begin, int64_t length) const;

  std::string path_;
  Vocabulary vocabulary_;
  std::variant<std::vector<uint8_t>, std::vector<uint16_t>, std::vector<uint32_t>> tokens_;
  int64_t train_size_ = 0;
};

}  // namespace gradlab::data
