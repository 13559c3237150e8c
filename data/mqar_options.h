// The mqar task's own settings (data/mqar_task.h). Its sequence length and vocabulary are the
// flags it shares with other tasks: --context (TextOptions::context) and --symbols
// (SequenceTaskOptions::num_symbols), which its factory passes to it by name.
#pragma once

#include <cstdint>

namespace gradlab::data {

struct MqarOptions {
  int64_t pairs = 8;  // key-value pairs per sequence, each key queried once
};

}  // namespace gradlab::data
