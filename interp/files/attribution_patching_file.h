// The HDF5 file `gradlab patch --method attribution` writes (docs/circuits.md, "Attribution
// patching"): the datasets of a patching file (interp/files/patching_file.h) with the estimates as
// /scores, so that scripts/plot_patching.py draws it, and the exact patching of the top sites:
// strings /top_rows [K], int64 /top_positions [K] (-1: every position), float64
// /top_attribution and /top_exact [K], and the float64 root attribute correlation (NaN for K < 2).
#pragma once

#include <string>
#include <vector>

#include "interp/files/patching_file.h"

namespace gradlab::interp {

struct AttributionPatchingResults {
  PatchingResults estimates;  // scores: the normalised estimates (0: corrupted, 1: clean)
  // The sites the estimates rank highest, with both normalised scores.
  std::vector<std::string> top_rows;  // as estimates.rows
  std::vector<int64_t> top_positions;
  std::vector<double> top_attribution, top_exact;
  double correlation = 0;  // of top_attribution and top_exact
};

// Throws FileError naming the file if it cannot be written.
void write_attribution_patching_file(const std::string& path,
                                     const AttributionPatchingResults& results);

}  // namespace gradlab::interp
