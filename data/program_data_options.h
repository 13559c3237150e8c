// What the task of a program's own data (data/program_data.cpp) records: the vocabulary and the
// positions of the model the program trained, which a built-in task would have set.
#pragma once

#include <cstdint>

namespace gradlab::data {

struct ProgramDataOptions {
  int64_t vocab_size = 0;  // V
  int64_t positions = 0;   // the model's max_len
};

}  // namespace gradlab::data
