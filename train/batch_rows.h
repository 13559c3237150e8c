// The rows of a batch, and the share of them each process of a group takes: the one-process
// evaluation walks the held-out set in chunks of rows, and every process of a group trains and
// evaluates its own share (Trainer::distribute).
#pragma once

#include <cstdint>
#include <utility>

#include "nn/sequence_model.h"
#include "train/process_group.h"

namespace gradlab::train {

// Rows [start, start + count) of every array of a batch (an empty array stays empty).
nn::SequenceBatch rows_of(const nn::SequenceBatch& batch, int64_t start, int64_t count);

// The rows [begin, end) of `rows` that the group's process takes: shares as equal as can be,
// contiguous, in rank order.
std::pair<int64_t, int64_t> share_of(int64_t rows, const ProcessGroup& group);

}  // namespace gradlab::train
