// Every differentiable op of gradlab, for code that wants them all.
#pragma once

#include "autograd/compare.h"
#include "autograd/dropout.h"
#include "autograd/elementwise.h"
#include "autograd/graph.h"
#include "autograd/index.h"
#include "autograd/matmul.h"
#include "autograd/norm.h"
#include "autograd/reduce.h"
#include "autograd/sampling.h"
#include "autograd/shape_ops.h"
#include "autograd/softmax.h"
#include "autograd/tensor.h"
