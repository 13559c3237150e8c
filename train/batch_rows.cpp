// A process's share of a batch's rows (batch_rows.h).
#include "train/batch_rows.h"

namespace gradlab::train {

std::pair<int64_t, int64_t> share_of(int64_t rows, const ProcessGroup& group) {
  return {rows * group.rank() / group.size(), rows * (group.rank() + 1) / group.size()};
}

}  // namespace gradlab::train
