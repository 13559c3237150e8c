// `gradlab train` under mpirun: before the first step, every process must be about to train the
// same model on the same data, or their summed gradients would train none of them.
#pragma once

#include "data/task.h"
#include "train/config.h"
#include "train/process_group.h"
#include "train/trainer.h"

namespace gradlab::cli {

// Refuses to train unless every process of the group (which already runs the same gradlab
// binary: check_same_command) runs the same kernel variant, configuration, text and starting state
// (parameters, optimizer, step), rank 0 naming the first that differs on stderr. A collective.
// Returns -1 or an exit code.
int check_same_start(const train::RunConfig& config, const data::Task& task,
                     const train::Trainer& trainer, train::ProcessGroup& group);

}  // namespace gradlab::cli
