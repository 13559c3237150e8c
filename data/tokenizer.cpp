// The rows of the tokenizer table.
#include "data/tokenizer.h"

#include <algorithm>

#include "autograd/error.h"
#include "autograd/format.h"

namespace gradlab::data {

const std::vector<TokenizerKind>& tokenizer_kinds() {
  static const std::vector<TokenizerKind> kinds{
      {Tokenizer::Char, "char", "character"},
      {Tokenizer::Byte, "byte", "byte"},
  };
  return kinds;
}

Tokenizer tokenizer_named(const std::string& name) {
  const std::vector<TokenizerKind>& kinds = tokenizer_kinds();
  const auto it = std::find_if(kinds.begin(), kinds.end(),
                               [&](const TokenizerKind& k) { return name == k.name; });
  if (it != kinds.end()) return it->id;
  std::string names;
  for (size_t i = 0; i < kinds.size(); ++i) {
    names += (i == 0 ? "" : i + 1 == kinds.size() ? " or " : ", ") + std::string(kinds[i].name);
  }
  throw ConfigError("unknown tokenizer " + quote(name) + " (expected " + names + ")");
}

const TokenizerKind& tokenizer_kind(Tokenizer tokenizer) {
  for (const TokenizerKind& k : tokenizer_kinds()) {
    if (k.id == tokenizer) return k;
  }
  throw std::logic_error("tokenizer_kind: a tokenizer without a row");
}

}  // namespace gradlab::data
