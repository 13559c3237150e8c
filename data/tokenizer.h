// The table of tokenizers, the one place that knows their names: `char` (the distinct Unicode
// code points of a UTF-8 file) and `byte` (the 256 byte values, any file). data/text.h reads
// a file with one.
#pragma once

#include <string>
#include <vector>

namespace gradlab::data {

enum class Tokenizer { Char, Byte };

struct TokenizerKind {
  Tokenizer id;
  const char* name;  // the --tokenizer value
  const char* unit;  // what one token is: "bits per <unit>"
};

const std::vector<TokenizerKind>& tokenizer_kinds();
// The tokenizer of a --tokenizer value; throws ConfigError "unknown tokenizer 'x' (expected
// char or byte)".
Tokenizer tokenizer_named(const std::string& name);
const TokenizerKind& tokenizer_kind(Tokenizer tokenizer);

}  // namespace gradlab::data
