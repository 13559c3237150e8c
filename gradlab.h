// gradlab in one include, for a program built on an installed gradlab: the tensor and its ops,
// the thread setting, gradient checking, the layers and models, the toy tasks, and training
// (optimizers, checkpoints, train::fit, metrics.csv, the run directory's claim). `#include
// <gradlab/gradlab.h>`; or include the parts, e.g. <gradlab/autograd/tensor.h>,
// <gradlab/nn/attention.h>.
#pragma once

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "autograd/threads.h"
#include "data/data_source.h"
#include "data/sequence_task.h"
#include "data/task.h"
#include "data/tasks.h"
#include "data/text_task.h"
#include "nn/attention.h"
#include "nn/layers.h"
#include "nn/models.h"
#include "nn/module.h"
#include "nn/sequence_model.h"
#include "nn/transformer.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/fit.h"
#include "train/io/run_directory_claim.h"
#include "train/metrics_log.h"
#include "train/optimizer.h"
#include "train/trainer.h"
