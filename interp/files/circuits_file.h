// The HDF5 file `gradlab circuits` writes (docs/circuits.md, "The file"): float64 datasets
// /ov_norm, /qk_norm, /copying_score, /diagonal_top1, /diagonal_mean_rank [L, H],
// /ov_singular_values, /qk_singular_values [L, H, D], /composition/q, /composition/k,
// /composition/v [L*H, L*H] (NaN where the pair does not compose), /baseline [3] (q, k, v),
// /attentions fixed-length strings [L], and on the root the attributes baseline_draws (int64)
// and seed (uint64).
#pragma once

#include <string>

#include "interp/circuits.h"

namespace gradlab::interp {

// Throws FileError naming the file if it cannot be written.
void write_circuits_file(const std::string& path, const CircuitReport& report,
                         const CircuitOptions& options);

}  // namespace gradlab::interp
