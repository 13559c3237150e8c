// The share of a batch's rows each process of a group takes: every process of a group trains and
// evaluates its own share (Trainer::distribute), cut with nn::rows_of.
#pragma once

#include <cstdint>
#include <utility>

#include "nn/sequence_model.h"
#include "train/process_group.h"

namespace gradlab::train {

// The rows [begin, end) of `rows` that the group's process takes: shares as equal as can be,
// contiguous, in rank order.
std::pair<int64_t, int64_t> share_of(int64_t rows, const ProcessGroup& group);

}  // namespace gradlab::train
