// The HDF5 file `gradlab dla` writes (docs/commands.md, "dla"): /labels strings [N] (the parts of
// the residual stream, interp/direct_logit_attribution.h), float64 /mean and /std [N] (each
// part's contribution to the logit or logit difference over the rows read); on the root the
// int64 attributes rows, position, answer_token and versus_token (-1: the answer position, each
// row's target, no other token) and the float64 logit_mean (the model's own). For one prompt, its
// tokens too: /inputs [T], /answer [A] and /source [S] (encoder-decoder only).
#pragma once

#include <string>
#include <vector>

#include "interp/direct_logit_attribution.h"
#include "nn/sequence_model.h"

namespace gradlab::interp {

// Writes summary, measured with options; prompt (with the model's answer) for one prompt, null
// for a data set. Throws FileError naming the file if it cannot be written.
void write_dla_file(const std::string& path, const DlaSummary& summary, const DlaOptions& options,
                    const nn::SequenceBatch* prompt, const std::vector<int64_t>& answer);

}  // namespace gradlab::interp
