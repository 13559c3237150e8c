// The HDF5 file `gradlab heads` writes, read by scripts/plot_heads.py (docs/hooks.md, "Head
// scores"): float64 /previous_token, /duplicate_token and /induction [L, H] (a row per
// hook_pattern point, in forward order), /points fixed-length strings [L], and on the root the
// int64 attributes length (n) and sequences and the uint64 attribute seed (length and sequences
// 0 for scores over --data or --held-out, which read no random sequences).
#pragma once

#include <string>
#include <vector>

#include "interp/head_scores.h"

namespace gradlab::interp {

// Writes the scores of head_scores(model, options), options.length being the n they were
// measured with (head_score_length). Throws ShapeError when the points' head counts differ (the
// datasets are [L, H]), FileError naming the file if it cannot be written.
void write_head_scores_file(const std::string& path, const std::vector<LayerHeadScores>& scores,
                            const HeadScoreOptions& options);

}  // namespace gradlab::interp
