// Attribution patching (Nanda 2023; Syed et al. 2023): the first-order estimate of activation
// patching (interp/patching.h) at every site at once, from the clean run's activations and one
// forward and one backward pass of the corrupted run, where the patch would be made.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "interp/patching.h"

namespace gradlab::interp {

// A metric of the logits [B, T, V] that stays in the autograd graph: a one-element tensor that
// backward() differentiates (a logit difference: sum(logits * weights) with weights +1 and -1).
using DifferentiableMetric = std::function<Tensor(const Tensor& logits)>;

// The metric of the clean and corrupted runs, and per site its estimate for the corrupted run
// patched there: metric(corrupt) + sum over the site's part of (clean - corrupt) * d metric /
// d activation, the gradient taken on the corrupted run. Where the metric is linear in a point's
// activation the estimate is what patch_each measures.
struct AttributedMetrics {
  double clean = 0, corrupt = 0;
  std::vector<double> estimated;  // one per site
};

// The estimate at each site of sites, which patch_sites lists (the points' head and position
// axes as patch_each cuts them). clean and corrupt must read sequences of the same shapes
// (ShapeError otherwise). Needs grad mode (ConfigError under a NoGradGuard); the parameters'
// gradients are left as they were. Runs in the model's current mode.
AttributedMetrics attribute_each(const nn::SequenceModel& model, const nn::SequenceBatch& clean,
                                 const nn::SequenceBatch& corrupt,
                                 const std::vector<PatchSite>& sites,
                                 const DifferentiableMetric& metric);

// The indices of the k values farthest from baseline (at most all of them), the farthest first:
// the sites an attribution ranks highest, whichever way they move the metric.
std::vector<size_t> top_indices(const std::vector<double>& values, double baseline, size_t k);

// Pearson's correlation of a and b (same length); NaN for fewer than two values or a constant.
double correlation(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace gradlab::interp
