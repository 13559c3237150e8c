// Rows of a batch and a process's share of them (batch_rows.h).
#include "train/batch_rows.h"

#include <vector>

namespace gradlab::train {
namespace {

// Rows [start, start + count) of a [B, T] index array (an empty array stays empty).
Indices rows_of(const Indices& batch, int64_t start, int64_t count) {
  if (batch.shape.empty()) return batch;
  const int64_t length = batch.shape[1];
  return Indices({count, length},
                 std::vector<int64_t>(batch.values.begin() + start * length,
                                      batch.values.begin() + (start + count) * length));
}

}  // namespace

nn::SequenceBatch rows_of(const nn::SequenceBatch& batch, int64_t start, int64_t count) {
  return {rows_of(batch.source, start, count), rows_of(batch.inputs, start, count),
          rows_of(batch.targets, start, count)};
}

std::pair<int64_t, int64_t> share_of(int64_t rows, const ProcessGroup& group) {
  return {rows * group.rank() / group.size(), rows * (group.rank() + 1) / group.size()};
}

}  // namespace gradlab::train
