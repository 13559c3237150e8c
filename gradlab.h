// gradlab in one include, for a program built on an installed gradlab: the tensor and its ops,
// the thread setting, gradient checking, the layers and models, text generation, head scores,
// the tasks and their data sources, and training (optimizers, checkpoints, train::fit, metrics.csv,
// run directories and their claim, attention files). `#include <gradlab/gradlab.h>`; or include the
// parts, e.g. <gradlab/autograd/tensor.h>, <gradlab/nn/attention.h>.
//
// Installed but deliberately left out, as gradlab's own machinery (a test checks that every
// other installed header is reached from here, and that each entry below exists):
//   autograd/kernels/         the kernels behind the ops, one variant per instruction set
//   autograd/format.h         how messages show numbers and user text
//   autograd/kinds.h          the look-up behind every table of kinds
//   autograd/op_checks.h      the gradient-check registry the test suite runs
//   data/task_rows.h          the built-in tasks' factories, for the task table
//   train/batch_rows.h        how a group's processes share a batch's rows
//   train/fingerprint.h       the check that a training group's processes agree
//   train/share_threads.h     how a step's shares and an evaluation's chunks take the threads
//   train/stop_signals.h      the signal flag behind LoopPolicy::stop_on_signal
//   io/atomic_file.h          how a checkpoint replaces a file
//   io/attribute_value.h      the scalar attribute type behind train::ConfigValue
//   io/hdf5_checksum.h        HDF5's metadata checksum, for the checkpoint reader
#pragma once

#include "autograd/attention.h"
#include "autograd/cpu.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "autograd/threads.h"
#include "data/data_source.h"
#include "data/distinct_draws.h"
#include "data/induction_task.h"
#include "data/modular_task.h"
#include "data/mqar_task.h"
#include "data/sequence_task.h"
#include "data/streams.h"
#include "data/task.h"
#include "data/tasks.h"
#include "data/text_task.h"
#include "data/tms_task.h"
#include "interp/ablation.h"
#include "interp/attribution_patching.h"
#include "interp/circuits.h"
#include "interp/direct_logit_attribution.h"
#include "interp/factored_matrix.h"
#include "interp/files/activation_file.h"
#include "interp/files/attention_file.h"
#include "interp/files/attribution_patching_file.h"
#include "interp/files/circuits_file.h"
#include "interp/files/dla_file.h"
#include "interp/files/fourier_file.h"
#include "interp/files/head_scores_file.h"
#include "interp/files/lens_file.h"
#include "interp/files/patching_file.h"
#include "interp/files/sae_file.h"
#include "interp/fourier.h"
#include "interp/head_scores.h"
#include "interp/intervention.h"
#include "interp/logit_lens.h"
#include "interp/patching.h"
#include "interp/path_patching.h"
#include "interp/sae.h"
#include "interp/sae_model.h"
#include "interp/sae_run.h"
#include "interp/sae_training.h"
#include "nn/attention.h"
#include "nn/generate.h"
#include "nn/hooks.h"
#include "nn/initialisation.h"
#include "nn/layers.h"
#include "nn/model_options.h"
#include "nn/models.h"
#include "nn/module.h"
#include "nn/module_checks.h"
#include "nn/module_registry.h"
#include "nn/sequence_model.h"
#include "nn/toy_model.h"
#include "nn/transformer.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/fit.h"
#include "train/io/run_directory.h"
#include "train/io/run_directory_claim.h"
#include "train/memory.h"
#include "train/metrics_log.h"
#include "train/modular_pairs.h"
#include "train/optimizer.h"
#include "train/sweep/child_runs.h"
#include "train/sweep/sweep_runs.h"
#include "train/trained_model.h"
#include "train/trainer.h"
#include "train/training_run.h"
