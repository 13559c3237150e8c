// Where a run's batches come from: the interface every task's data implements (data/tasks.h
// builds the built-in ones), and the one a program of its own derives from to train on data of
// its own through train::fit.
#pragma once

#include <cstdint>
#include <optional>

#include "nn/sequence_model.h"

namespace gradlab::data {

// Both are pure functions of their arguments, so a resumed run sees exactly the batches it
// would have seen.
class DataSource {
 public:
  virtual ~DataSource() = default;
  // The batch optimizer step `step` (1, 2, ...) trains on.
  virtual nn::SequenceBatch training_batch(int64_t step) const = 0;
  // The fixed held-out set that evaluate() scores.
  virtual nn::SequenceBatch heldout() const = 0;
  // The whole training set, for a source whose training set is finite (data::Task::
  // training_set_size): evaluate() scores it beside the held-out set. Empty for a source that
  // draws fresh samples at every step.
  virtual std::optional<nn::SequenceBatch> training_set() const { return std::nullopt; }
};

}  // namespace gradlab::data
