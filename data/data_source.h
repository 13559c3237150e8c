// Where a run's batches come from: the interface every task's data implements (data/tasks.h
// builds the built-in ones), and the one a program of its own derives from to train on data of
// its own through train::fit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nn/sequence_model.h"

namespace gradlab::data {

// A part of the held-out set's targets whose loss is reported on its own (induction: the first
// copy and the second): the held-out batch's targets with only the part's positions counted, the
// others nn::kIgnoreTarget.
struct TargetPart {
  std::string name;  // "first_copy": metrics.csv's column first_copy_loss
  Indices targets;   // the shape of the held-out targets
};

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
  // The parts of heldout() scored on their own, in the order of Task::loss_parts(); none by
  // default.
  virtual std::vector<TargetPart> heldout_parts() const { return {}; }
};

}  // namespace gradlab::data
