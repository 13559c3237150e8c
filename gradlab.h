// gradlab in one include, for a program built on an installed gradlab: the tensor and its ops,
// gradient checking, the layers and models, text generation, the toy tasks and the data
// streams, and training (optimizers, checkpoints, run directories, attention files,
// train::fit). `#include <gradlab/gradlab.h>`; or include the parts, e.g.
// <gradlab/autograd/tensor.h>, <gradlab/nn/attention.h>.
//
// Installed but deliberately left out, as gradlab's own machinery (a test checks that every
// other installed header is reached from here, and that each entry below exists):
//   autograd/kernels/         the kernels behind the ops, one variant per instruction set
//   autograd/format.h         how messages show numbers and user text
//   autograd/op_checks.h      the gradient-check registry the test suite runs
//   nn/module_checks.h        the same for modules
//   data/fingerprint.h        the check that a training group's processes agree
//   data/markov.h             a text source of known entropy, for the tests
//   train/atomic_file.h       how a checkpoint replaces a file
//   train/hdf5_checksum.h     HDF5's metadata checksum, for the checkpoint reader
#pragma once

#include "autograd/attention.h"
#include "autograd/cpu.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "data/streams.h"
#include "data/task.h"
#include "nn/attention.h"
#include "nn/generate.h"
#include "nn/layers.h"
#include "nn/models.h"
#include "nn/module.h"
#include "nn/sequence_model.h"
#include "nn/transformer.h"
#include "train/attention_file.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/fit.h"
#include "train/memory.h"
#include "train/optimizer.h"
#include "train/run_directory.h"
#include "train/trainer.h"
