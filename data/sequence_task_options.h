// The sequence tasks' own settings (data/sequence_task.h: copy, reverse, sort, recall,
// induction): the sizes of a sample and of its vocabulary. mqar reads num_symbols too (its
// --symbols, data/mqar_task.h).
#pragma once

#include <cstdint>

namespace gradlab::data {

struct SequenceTaskOptions {
  // Data tokens per sample (recall: key-value pairs; induction: the longest block).
  int64_t length = 10;
  int64_t num_symbols = 10;  // data symbols 1..num_symbols (mqar: the vocabulary)
};

}  // namespace gradlab::data
