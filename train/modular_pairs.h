// A modular-addition checkpoint's pairs as its model reads them, split as its run split them:
// what the Fourier analysis (interp/fourier.h) runs the model over. The command line and the
// Python front end both load through it.
#pragma once

#include <cstdint>

#include "nn/sequence_model.h"
#include "train/trained_model.h"

namespace gradlab::train {

struct ModularPairBatches {
  int64_t modulus = 0;
  nn::SequenceBatch train, heldout;  // each row one pair (a, b); together the p * p pairs
};

// Throws ConfigError naming the checkpoint when its task is not modular with --operation add
// ("<path>: a model of task copy; the Fourier analysis reads modular addition").
ModularPairBatches modular_pair_batches(const TrainedModel& trained);

}  // namespace gradlab::train
