// Activation patching: a corrupted run with one activation (or one head's, or one position's
// part of it) taken from a clean run, to find where the model carries what tells the two apart.
// The sites are cut along the axes a point's letters name (docs/hooks.md): its heads (H or KV)
// and, on request, its positions (T, Tq, Tk or S).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "nn/hooks.h"
#include "nn/sequence_model.h"

namespace gradlab::interp {

// One patched part of a point: the point whole, or one head, or one position, or both.
struct PatchSite {
  std::string point;
  int64_t head = -1;      // the head along the point's H or KV axis; -1: every head
  int64_t position = -1;  // along its first position axis; -1: every position
};

// The sites of the points filter matches (ConfigError naming the closest points when none):
// one per head for a point with a head axis, and with per_position one per position of each.
std::vector<PatchSite> patch_sites(const std::vector<nn::HookPointInfo>& points,
                                   const nn::HookFilter& filter, bool per_position);

// The points the sites cut, as a filter ("the patched points"): what a patching run caches.
nn::HookFilter points_of(const std::vector<PatchSite>& sites);

// The axis of a point's head (H or KV) and of its first position (T, Tq, Tk or S), from its
// letters; -1 where it has none.
int64_t head_axis(const nn::HookPointInfo& point);
int64_t position_axis(const nn::HookPointInfo& point);
// Whether that position axis runs over the encoder's source (S) rather than the decoder's inputs:
// the encoder's points, the source embeddings, and cross-attention's keys and values.
bool positions_are_source(const nn::HookPointInfo& point);

// A metric of the logits of the clean run, the corrupted run, and the corrupted run patched at
// each site. All three are computed the same way (a layer whose attention points are patched
// takes the composed path in every run), so that a site whose values are the same in both runs
// scores the corrupted run's value exactly, and one that carries everything the clean run's.
struct PatchedMetrics {
  double clean = 0, corrupt = 0;
  std::vector<double> patched;  // one per site
};

// For each site in order, metric(logits [B, T, V]) of model on corrupt with the site's part of
// its point replaced by that part of the clean run's activation (the rest stays the corrupted
// run's own, bit for bit). clean and corrupt must read sequences of the same shapes (ShapeError
// otherwise). Runs without a graph, in the model's current mode.
PatchedMetrics patch_each(const nn::SequenceModel& model, const nn::SequenceBatch& clean,
                          const nn::SequenceBatch& corrupt, const std::vector<PatchSite>& sites,
                          const std::function<double(const Tensor& logits)>& metric);

}  // namespace gradlab::interp
