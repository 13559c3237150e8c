// The text task's own settings (data/text_task.h): a language model on a file of the user's.
#pragma once

#include <cstdint>
#include <string>

#include "data/tokenizer.h"

namespace gradlab::data {

struct TextOptions {
  std::string data;                                              // the file
  std::string tokenizer = tokenizer_kind(Tokenizer::Char).name;  // a row of tokenizer_kinds()
  int64_t context = 64;       // tokens the model reads: windows of context + 1 tokens
  double val_fraction = 0.1;  // the file's last tokens, held out
  int64_t eval_iters = 200;   // validation windows per evaluation (a fixed set)
  bool eval_full = false;     // evaluate on the whole validation split instead
  // The char tokenizer's symbols (Vocabulary::serialize), set from the file by the task's
  // prepare() and kept in checkpoints, so a model decodes without its data file.
  std::string vocabulary;
};

}  // namespace gradlab::data
