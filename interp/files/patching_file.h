// The HDF5 file `gradlab patch` writes, read by scripts/plot_patching.py (docs/hooks.md,
// "Activation patching"): int64 /clean_inputs, /corrupt_inputs [T] (and /clean_source,
// /corrupt_source [S] for the encoder-decoder), /clean_answer, /corrupt_answer [A], strings
// /rows and /row_axes [R], float64 /scores [R, P] (P the longest row; NaN past a row's end), and
// the float64 root attributes clean_logit_difference and corrupt_logit_difference.
#pragma once

#include <string>
#include <vector>

#include "nn/sequence_model.h"

namespace gradlab::interp {

// What `gradlab patch` found: per row (a point, or one head of it) the normalised logit
// difference of the corrupted run with that part patched from the clean run, at every position
// (one value per row without --per-position).
struct PatchingResults {
  nn::SequenceBatch clean, corrupt;
  std::vector<int64_t> clean_answer, corrupt_answer;
  std::vector<std::string> rows;      // "blocks.0.hook_resid_pre", "blocks.1.attn.hook_z head 2"
  std::vector<std::string> row_axes;  // the position axis of each row: "T", "S", or "" (whole)
  std::vector<std::vector<double>> scores;              // [rows][positions]
  double clean_difference = 0, corrupt_difference = 0;  // the metric's 1 and 0
};

// Throws FileError naming the file if it cannot be written.
void write_patching_file(const std::string& path, const PatchingResults& results);

}  // namespace gradlab::interp
