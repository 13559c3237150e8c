// The files `gradlab fourier` writes (docs/experiments.md, "Grokking's Fourier circuit"). The
// HDF5 file of one checkpoint: float64 /basis [p, p], /embedding_norms [K + 1] (index 0 the
// constant), int64 /key_frequencies [n] and float64 /key_shares [n], float64 /neuron_shares
// [F, K + 1], int64 /neuron_frequency and /neuron_cluster [F] (0: none) and /cluster_counts
// [K + 1] (index 0 the unclustered), float64 /logit_norms [K + 1, K + 1]; on the root the int64
// modulus and step, the float64 share, neuron_threshold, clustered_fraction and the losses
// train_loss, test_loss, restricted_loss and excluded_loss. Or the same per frequency as a CSV
// table; and a run's curve, a CSV row per checkpoint.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "interp/fourier.h"

namespace gradlab::interp {

// Throws FileError naming the file if it cannot be written.
void write_fourier_file(const std::string& path, const FourierAnalysis& analysis,
                        const FourierOptions& options, int64_t step);

// frequency,embedding_norm,key_share,neurons,logit_norm: a row per frequency (0 the constant;
// key_share 0 for a frequency that is not key; logit_norm the diagonal term (k, k)). Throws
// FileError naming the file if it cannot be written.
void write_fourier_table(const std::string& path, const FourierAnalysis& analysis);

// One checkpoint's row of a run's curve.
struct FourierCurvePoint {
  int64_t step = 0;
  FourierLosses losses;
  std::vector<int64_t> key_frequencies;
};

// step,train_loss,test_loss,restricted_loss,excluded_loss,key_frequencies (space-separated):
// a row per point. Throws FileError naming the file if it cannot be written.
void write_fourier_curve(const std::string& path, const std::vector<FourierCurvePoint>& points);

}  // namespace gradlab::interp
