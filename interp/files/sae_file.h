// The HDF5 file of a sparse autoencoder (docs/experiments.md, "Sparse autoencoders"): the
// parameters /sae/W_enc [C, F], /sae/b_enc [F], /sae/W_dec [F, C], /sae/b_dec [C] (float32,
// checksummed as a checkpoint's tensors), and on the root its configuration: the strings kind
// ("gradlab sparse autoencoder"), hook and checkpoint, the int64 d_in, d_sae, top_k and seed, the
// float64 l1_coefficient and the uint64 model_fingerprint.
#pragma once

#include <memory>
#include <string>

#include "interp/sae.h"

namespace gradlab::interp {

// Writes sae to path (whole or not at all); FileError naming the file if it cannot be written.
void write_sae_file(const std::string& path, const Sae& sae);

// Reads the SAE at path. Throws CheckpointError "<path>: <item>: <problem>" for a file that is
// missing, not HDF5, damaged (a checksum), not an SAE's (no kind, or another), or inconsistent
// (a configuration the SAE refuses, a parameter of another shape than its configuration's, a
// non-finite value).
std::shared_ptr<Sae> read_sae_file(const std::string& path);

}  // namespace gradlab::interp
