// The HDF5 file `gradlab activations` writes, read by scripts/plot_activations.py
// (docs/hooks.md, "The file"): /inputs int64 [T], /answer int64 [A] and /source int64 [S]
// (encoder-decoder only), and one float32 dataset per cached hook point, named as the point
// ("blocks.0.attn.hook_pattern", "blocks.0.attn.hook_pattern_grad"), of the point's shape without
// its batch axis of 1, with a string attribute `letters` ("[H, Tq, Tk]"). For a data set
// (write_activation_set_file) the tokens are [N, T] and each point is reduced over the examples
// or kept with a leading example axis [N, ...], and at the answer loses its position axis.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "nn/hooks.h"
#include "nn/sequence_model.h"

namespace gradlab::interp {

// Writes the cache of a batch of one sequence; points give each point's letters (hook_points).
// Throws FileError naming the file if it cannot be written.
void write_activation_file(const std::string& path, const nn::SequenceBatch& batch,
                           const std::vector<int64_t>& answer, const nn::ActivationCache& cache,
                           const std::vector<nn::HookPointInfo>& points);

// How write_activation_set_file lays out N examples.
struct ActivationSetLayout {
  int64_t examples = 0;        // N, the rows the batches bring in all
  bool keep_examples = false;  // one row per example [N, ...]; else the mean over them
  bool at_answer = false;      // each example's answer position only (the T or Tq axis dropped)
};

// One batch's cache: batch [R, T], cache its points' [R, ...] (a point of no batch axis, [T, C],
// is every example's), positions [R] each row's answer position.
using ActivationBatchSink =
    std::function<void(const nn::SequenceBatch& batch, const nn::ActivationCache& cache,
                       const std::vector<int64_t>& positions)>;

// Writes the caches of a data set of one length, streamed: produce calls the sink once per batch,
// in the examples' order, while the file is open; with keep_examples each batch is written into
// its rows of [N, ...] datasets, else summed in float64 (one example's worth of memory) and the
// mean written at the end. The file holds /inputs and /targets [N, T] (/source [N, S]), the root
// attributes examples (int64), reduce ("mean" or "none") and at ("answer" or "all"), and per point
// a float32 dataset whose `letters` name its axes ("[N, H, Tk]"). Throws FileError naming the file
// if it cannot be written, and what produce throws (the file is then not written).
void write_activation_set_file(const std::string& path,
                               const std::vector<nn::HookPointInfo>& points,
                               const ActivationSetLayout& layout,
                               const std::function<void(const ActivationBatchSink&)>& produce);

}  // namespace gradlab::interp
