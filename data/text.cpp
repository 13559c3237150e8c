#include "data/text.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/random.h"
#include "data/streams.h"

namespace gradlab::data {
namespace {

namespace fs = std::filesystem;

constexpr size_t kBlockBytes = size_t{1} << 20;

// The tokenizer a --tokenizer value names; the error names the flag.
Tokenizer tokenizer_flag(const std::string& name) {
  try {
    return tokenizer_named(name);
  } catch (const ConfigError& e) {
    throw ConfigError(std::string("--tokenizer: ") + e.what());
  }
}

// Length of the UTF-8 sequence a lead byte opens, 0 for a byte that cannot open one.
int sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Code points as they are read, in the narrowest vector that holds the largest so far.
class CodePoints {
 public:
  void push(char32_t c) {
    if (c > 0xFFFF) widen<uint32_t>();
    if (c > 0xFF) widen<uint16_t>();
    std::visit(
        [c](auto& v) {
          v.push_back(static_cast<typename std::decay_t<decltype(v)>::value_type>(c));
        },
        values_);
  }
  auto& values() { return values_; }
  size_t size() const {
    return std::visit([](const auto& v) { return v.size(); }, values_);
  }

 private:
  template <class T>
  void widen() {
    std::visit(
        [this](auto& v) {
          using Have = typename std::decay_t<decltype(v)>::value_type;
          if constexpr (sizeof(Have) < sizeof(T)) values_ = std::vector<T>(v.begin(), v.end());
        },
        values_);
  }
  std::variant<std::vector<uint8_t>, std::vector<uint16_t>, std::vector<uint32_t>> values_;
};

// Replaces each code point by its token id, in the narrowest type that holds the vocabulary.
template <class Tokens>
Tokens to_ids(auto& code_points, const std::vector<uint32_t>& id_of) {
  using From = typename std::decay_t<decltype(code_points)>::value_type;
  using To = typename Tokens::value_type;
  if constexpr (std::is_same_v<From, To>) {
    for (From& c : code_points) c = static_cast<From>(id_of[c]);
    return std::move(code_points);
  } else {
    Tokens ids(code_points.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<To>(id_of[code_points[i]]);
    code_points = {};  // freed before the caller keeps ids
    return ids;
  }
}

// "'é' (U+00E9)", "'\n' (U+000A)": a character as a message shows it, readable even when it is
// invisible, and on one line.
std::string describe_character(char32_t c) {
  char code[16];
  std::snprintf(code, sizeof code, "U+%04X", static_cast<unsigned>(c));
  return quote(encode_utf8(c)) + " (" + code + ")";
}

}  // namespace

char32_t decode_utf8(std::string_view text, size_t& offset) {
  const auto invalid = [&] {
    return InvalidUtf8("invalid UTF-8 at byte " + format_number(offset));
  };
  const auto lead = static_cast<unsigned char>(text[offset]);
  const int length = sequence_length(lead);
  if (length == 0 || offset + length > text.size()) throw invalid();
  if (length == 1) return text[offset++];
  char32_t c = lead & (0x7F >> length);
  for (int i = 1; i < length; ++i) {
    const auto next = static_cast<unsigned char>(text[offset + i]);
    if ((next & 0xC0) != 0x80) throw invalid();
    c = (c << 6) | (next & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
  const char32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < smallest[length] || (c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF) throw invalid();
  offset += length;
  return c;
}

std::string encode_utf8(char32_t c) {
  std::string out;
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
  return out;
}

Vocabulary Vocabulary::bytes() {
  Vocabulary v;
  v.kind_ = Tokenizer::Byte;
  return v;
}

Vocabulary Vocabulary::characters(std::vector<char32_t> code_points) {
  if (code_points.empty()) throw ConfigError("char vocabulary: no characters");
  for (size_t i = 0; i < code_points.size(); ++i) {
    const char32_t c = code_points[i];
    // /config keeps the vocabulary as an HDF5 string, which ends at a NUL.
    if (c == 0) {
      throw ConfigError("char vocabulary: " + describe_character(c) +
                        " cannot be stored in a checkpoint");
    }
    if (c >= kMaxCharacters || (c >= 0xD800 && c <= 0xDFFF)) {
      throw ConfigError("char vocabulary: " + describe_character(c) + " is not a character");
    }
    if (i > 0 && c <= code_points[i - 1]) {
      throw ConfigError("char vocabulary: " + describe_character(c) +
                        (c == code_points[i - 1]
                             ? " appears twice"
                             : " comes after " + describe_character(code_points[i - 1])) +
                        " (token ids follow ascending code points)");
    }
  }
  Vocabulary v;
  v.kind_ = Tokenizer::Char;
  v.symbols_ = std::move(code_points);
  return v;
}

Vocabulary Vocabulary::deserialize(const std::string& kind, const std::string& symbols) {
  return deserialize(tokenizer_named(kind), symbols);
}

Vocabulary Vocabulary::deserialize(Tokenizer kind, const std::string& symbols) {
  if (kind == Tokenizer::Byte) {
    if (!symbols.empty()) throw ConfigError("byte vocabulary: unexpected symbols");
    return bytes();
  }
  std::vector<char32_t> code_points;
  try {
    for (size_t offset = 0; offset < symbols.size();) {
      code_points.push_back(decode_utf8(symbols, offset));
    }
  } catch (const InvalidUtf8& e) {
    throw ConfigError(std::string("char vocabulary: ") + e.what());
  }
  return characters(std::move(code_points));
}

std::string Vocabulary::serialize() const {
  std::string out;
  for (char32_t c : symbols_) out += encode_utf8(c);
  return out;
}

std::vector<int64_t> Vocabulary::encode(std::string_view text) const {
  std::vector<int64_t> tokens;
  if (kind_ == Tokenizer::Byte) {
    for (char c : text) tokens.push_back(static_cast<unsigned char>(c));
    return tokens;
  }
  for (size_t offset = 0; offset < text.size();) {
    const char32_t c = decode_utf8(text, offset);
    const auto it = std::lower_bound(symbols_.begin(), symbols_.end(), c);
    if (it == symbols_.end() || *it != c) {
      throw ConfigError("character " + describe_character(c) + " is not in the model's vocabulary");
    }
    tokens.push_back(it - symbols_.begin());
  }
  return tokens;
}

std::string Vocabulary::decode(int64_t token) const {
  if (token < 0 || token >= size()) {
    throw IndexError("token " + format_number(token) + " is outside the vocabulary of " +
                     format_number(size()));
  }
  if (kind_ == Tokenizer::Byte) return std::string(1, static_cast<char>(token));
  return encode_utf8(symbols_[static_cast<size_t>(token)]);
}

TextCorpus::TextCorpus(const std::string& path, const std::string& tokenizer, double val_fraction)
    : TextCorpus(path, tokenizer_flag(tokenizer), nullptr, val_fraction) {}

TextCorpus::TextCorpus(const std::string& path, const Vocabulary& vocabulary, double val_fraction)
    : TextCorpus(path, vocabulary.kind(), &vocabulary, val_fraction) {}

TextCorpus::TextCorpus(const std::string& path, Tokenizer tokenizer, const Vocabulary* fixed,
                       double val_fraction)
    : path_(path) {
  const auto fail = [&](const std::string& problem) { return ConfigError(path + ": " + problem); };
  if (!(val_fraction > 0 && val_fraction < 1)) {
    throw ConfigError("--val-fraction must be in (0, 1), got " + format_number(val_fraction));
  }
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (!fs::exists(status)) throw fail("no such file");
  if (fs::is_directory(status)) throw fail("is a directory, not a text file");
  if (!fs::is_regular_file(status)) throw fail("is not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw fail("cannot be read");

  std::string block(kBlockBytes, '\0');
  if (tokenizer == Tokenizer::Byte) {
    vocabulary_ = Vocabulary::bytes();
    std::vector<uint8_t> bytes;
    while (in) {
      in.read(block.data(), static_cast<std::streamsize>(block.size()));
      bytes.insert(bytes.end(), block.begin(), block.begin() + in.gcount());
    }
    tokens_ = std::move(bytes);
  } else {
    // Only a new vocabulary may be read another way: a model's is fixed.
    const std::string byte_hint =
        std::string(" (--tokenizer ") + tokenizer_kind(Tokenizer::Byte).name + " reads any file)";
    CodePoints code_points;
    std::vector<bool> present(Vocabulary::kMaxCharacters, false), known;
    if (fixed) {
      known = present;
      for (char32_t c : fixed->code_points()) known[c] = true;
    }
    std::string carry;    // an incomplete sequence at the end of the last block
    size_t consumed = 0;  // bytes of the file before `carry`
    while (in) {
      in.read(block.data(), static_cast<std::streamsize>(block.size()));
      std::string text = carry + block.substr(0, static_cast<size_t>(in.gcount()));
      size_t offset = 0;
      try {
        while (offset < text.size()) {
          const int length = sequence_length(static_cast<unsigned char>(text[offset]));
          if (length > 0 && offset + length > text.size() && in) break;  // ends in the next block
          const size_t at = offset;
          const char32_t c = decode_utf8(text, offset);
          if (fixed && !known[c]) {
            throw fail("character " + describe_character(c) + " at byte " +
                       format_number(consumed + at) + " is not in the model's vocabulary");
          }
          present[c] = true;
          code_points.push(c);
        }
      } catch (const InvalidUtf8&) {
        throw fail("invalid UTF-8 at byte " + format_number(consumed + offset) +
                   (fixed ? " (the model reads UTF-8 text)" : byte_hint));
      }
      carry = text.substr(offset);
      consumed += offset;
    }
    std::vector<char32_t> symbols;
    std::vector<uint32_t> id_of(Vocabulary::kMaxCharacters, 0);
    const std::vector<bool>& vocabulary_set = fixed ? known : present;
    for (char32_t c = 0; c < vocabulary_set.size(); ++c) {
      if (vocabulary_set[c]) {
        id_of[c] = static_cast<uint32_t>(symbols.size());
        symbols.push_back(c);
      }
    }
    if (code_points.size() == 0) throw fail("is empty");
    try {
      vocabulary_ = fixed ? *fixed : Vocabulary::characters(symbols);
    } catch (const ConfigError& e) {
      throw fail(e.what() + byte_hint);
    }
    const int64_t vocabulary = vocabulary_.size();
    std::visit(
        [&](auto& values) {
          if (vocabulary <= 0x100) {
            tokens_ = to_ids<std::vector<uint8_t>>(values, id_of);
          } else if (vocabulary <= 0x10000) {
            tokens_ = to_ids<std::vector<uint16_t>>(values, id_of);
          } else {
            tokens_ = to_ids<std::vector<uint32_t>>(values, id_of);
          }
        },
        code_points.values());
  }
  if (size() == 0) throw fail("is empty");
  train_size_ = static_cast<int64_t>(static_cast<double>(size()) * (1 - val_fraction));
}

int64_t TextCorpus::size() const {
  return std::visit([](const auto& v) { return static_cast<int64_t>(v.size()); }, tokens_);
}

std::string_view TextCorpus::token_bytes() const {
  return std::visit(
      [](const auto& v) {
        return std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0]));
      },
      tokens_);
}

int64_t TextCorpus::bytes_per_token() const {
  return std::visit([](const auto& v) { return static_cast<int64_t>(sizeof(v[0])); }, tokens_);
}

void TextCorpus::require_windows(int64_t length) const {
  for (const auto& [name, tokens] : {std::pair<const char*, int64_t>{"training", train_size_},
                                     {"validation", validation_size()}}) {
    if (tokens < length + 1) {
      throw ConfigError(path_ + ": the " + name + " split has " + format_number(tokens) +
                        " tokens, fewer than --context + 1 = " + format_number(length + 1) +
                        " (a longer file, a shorter --context or another --val-fraction)");
    }
  }
}

Indices TextCorpus::windows(const std::vector<int64_t>& starts, int64_t length) const {
  std::vector<int64_t> values;
  values.reserve(starts.size() * static_cast<size_t>(length + 1));
  std::visit(
      [&](const auto& tokens) {
        for (int64_t start : starts) {
          values.insert(values.end(), tokens.begin() + start, tokens.begin() + start + length + 1);
        }
      },
      tokens_);
  return Indices({static_cast<int64_t>(starts.size()), length + 1}, std::move(values));
}

Indices TextCorpus::training_windows(uint64_t seed, int64_t step, int64_t batch_size,
                                     int64_t length) const {
  require_windows(length);
  Generator gen(stream_seed(seed, static_cast<uint64_t>(step)));
  std::vector<int64_t> starts;
  for (int64_t i = 0; i < batch_size; ++i) {
    starts.push_back(static_cast<int64_t>(gen.below(static_cast<uint64_t>(train_size_ - length))));
  }
  return windows(starts, length);
}

Indices TextCorpus::validation_windows(uint64_t seed, int64_t count, int64_t length) const {
  require_windows(length);
  Generator gen(stream_seed(seed, kHeldoutIndex));
  std::vector<int64_t> starts;
  for (int64_t i = 0; i < count; ++i) {
    starts.push_back(train_size_ + static_cast<int64_t>(gen.below(
                                       static_cast<uint64_t>(validation_size() - length))));
  }
  return windows(starts, length);
}

Indices TextCorpus::validation_all(int64_t length) const {
  require_windows(length);
  return consecutive_windows(train_size_, length);
}

Indices TextCorpus::all_windows(int64_t length) const {
  if (size() < length + 1) {
    throw ConfigError(path_ + ": has " + format_number(size()) +
                      " tokens, fewer than --context + 1 = " + format_number(length + 1));
  }
  return consecutive_windows(0, length);
}

Indices TextCorpus::consecutive_windows(int64_t begin, int64_t length) const {
  std::vector<int64_t> starts;
  for (int64_t start = begin; start + length < size(); start += length) starts.push_back(start);
  return windows(starts, length);
}

}  // namespace gradlab::data
