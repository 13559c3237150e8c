// The rows of the tokenizer table.
#include "data/tokenizer.h"

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/kinds.h"

namespace gradlab::data {

const std::vector<TokenizerKind>& tokenizer_kinds() {
  static const std::vector<TokenizerKind> kinds{
      {Tokenizer::Char, "char", "character"},
      {Tokenizer::Byte, "byte", "byte"},
  };
  return kinds;
}

Tokenizer tokenizer_named(const std::string& name) {
  return row_named(tokenizer_kinds(), name, "tokenizer").id;
}

const TokenizerKind& tokenizer_kind(Tokenizer tokenizer) {
  return row_of(tokenizer_kinds(), tokenizer);
}

}  // namespace gradlab::data
