// The HDF5 file `gradlab lens` writes, read by scripts/plot_lens.py (docs/hooks.md, "The logit
// lens"): /inputs int64 [T], /answer int64 [A] and /source int64 [S] (encoder-decoder only),
// /targets int64 [T] (-100 where none counts), /layers strings [L + 1], and float32
// /answer_probability [L + 1, T] (NaN where no target), /top_probabilities [L + 1, T, K], with
// int64 /top_tokens [L + 1, T, K]. Over a data set (write_lens_set_file): /layers, float32
// /answer_probability [L + 1, P] (the mean p(target), P = T or 1 at the answer; NaN where no
// sequence has a target) and the root attributes examples (int64) and at ("answer" or "all").
#pragma once

#include <string>
#include <vector>

#include "interp/logit_lens.h"
#include "nn/sequence_model.h"

namespace gradlab::interp {

// Writes the logit lens of a batch of one sequence. Throws FileError naming the file if it
// cannot be written.
void write_lens_file(const std::string& path, const nn::SequenceBatch& batch,
                     const std::vector<int64_t>& answer, const LensProbabilities& lens);

// Writes the mean lens of a data set, read `at` ("answer" or "all"). Throws FileError naming the
// file if it cannot be written.
void write_lens_set_file(const std::string& path, const LensMean& mean, const std::string& at);

}  // namespace gradlab::interp
