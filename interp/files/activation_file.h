// The HDF5 file `gradlab activations` writes, read by scripts/plot_activations.py
// (docs/hooks.md, "The file"): /inputs int64 [T], /answer int64 [A] and /source int64 [S]
// (encoder-decoder only), and one float32 dataset per cached hook point, named as the point
// ("blocks.0.attn.hook_pattern", "blocks.0.attn.hook_pattern_grad"), of the point's shape without
// its batch axis of 1, with a string attribute `letters` ("[H, Tq, Tk]").
#pragma once

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

}  // namespace gradlab::interp
