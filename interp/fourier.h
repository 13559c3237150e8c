// The Fourier analysis of a modular-addition model (Nanda et al. 2023, "Progress measures for
// grokking"): the embedding's and the neurons' weight per frequency of the Fourier basis over the
// p numbers, the logits in the 2-D basis, and the restricted and excluded losses that measure how
// much of the model's answer the key frequencies carry. Everything is computed in float64.
// docs/experiments.md ("Grokking's Fourier circuit") shows it on a real run.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/sequence_model.h"

namespace gradlab::interp {

// The frequencies of the basis over p numbers (p odd): 1 .. (p - 1) / 2. Index 0 stands for the
// constant wherever a per-frequency array has K + 1 entries.
int64_t frequency_count(int64_t p);

// The Fourier basis over the numbers 0 .. p - 1, row-major [p, p]: row 0 the constant, then for
// k = 1 .. K the rows 2k - 1 = cos(2 pi k x / p) and 2k = sin(2 pi k x / p), each of unit norm
// (Nanda's fourier_basis). Throws ConfigError for an even p or p < 3 (an even p has a cosine
// without its sine, which the per-frequency pairs below do not hold).
std::vector<double> fourier_basis(int64_t p);

// The frequencies holding `share` of a spectrum: norms [K + 1] (index 0, the constant, left
// out), the smallest set whose squared norms reach share of the non-constant total, heaviest
// first, and each one's share of that total.
struct KeyFrequencies {
  std::vector<int64_t> frequencies;  // in [1, K], heaviest first
  std::vector<double> shares;        // [len(frequencies)]: of the non-constant squared norm
};
// Throws ConfigError for a share outside (0, 1].
KeyFrequencies key_frequencies(const std::vector<double>& norms, double share);

// embedding [p, C] (row x: number x's embedding) -> [K + 1]: the 2-norm of its constant
// component (index 0) and of each frequency's cos and sin components together (index k).
std::vector<double> embedding_frequency_norms(const std::vector<double>& embedding, int64_t p);

// The frequency each neuron computes with: a neuron's activations over the p x p inputs, mean
// removed, transformed by the basis on both axes; frequency k's terms are its cos and sin in a
// (with the constant in b), in b (with the constant in a), and their four products.
struct NeuronClusters {
  std::vector<double> shares;      // [N, K + 1]: share of neuron n's variance in k's terms (k=0: 0)
  std::vector<int64_t> frequency;  // [N]: the frequency of the largest share (0: a constant neuron)
  std::vector<int64_t> cluster;    // [N]: that frequency when its share >= the threshold, else 0
  std::vector<int64_t> counts;     // [K + 1]: neurons per cluster; index 0 the unclustered
  double clustered_fraction = 0;   // of the N neurons
};
// activations [p * p, N], row a * p + b the input (a, b). Throws ConfigError for a threshold
// outside (0, 1], ShapeError when the size is not p * p * N.
NeuronClusters neuron_clusters(const std::vector<double>& activations, int64_t p, int64_t neurons,
                               double threshold = 0.85);

// logits [p * p, p] (row a * p + b, column the answer c) -> [K + 1, K + 1]: the 2-norm, over
// every answer, of the logits' 2-D Fourier components whose a-index has frequency i and b-index
// frequency j (0: the constant).
std::vector<double> logit_frequency_norms(const std::vector<double>& logits, int64_t p);

// logits [p * p, p] split in two that sum to them: `kept`, each answer's column projected on
// cos(w (a + b)) and sin(w (a + b)) of every key frequency (w = 2 pi k / p; Nanda's
// get_component_cos_xpy and get_component_sin_xpy), and `removed`, the rest.
struct LogitSplit {
  std::vector<double> kept, removed;  // [p * p, p]
};
LogitSplit split_logits(const std::vector<double>& logits, int64_t p,
                        const std::vector<int64_t>& frequencies);

// Cross-entropy over the p answers (the logits of the numbers alone, as Nanda's), in nats.
struct FourierLosses {
  double train = 0, test = 0;
  // The key frequencies' part of the logits alone, each answer's mean of the rest over the inputs
  // added back (Nanda's bias correction), over all p * p inputs (Nanda's default).
  double restricted = 0;
  // The logits with the key frequencies' part removed, over the training inputs.
  double excluded = 0;
};
// logits [p * p, p]; answers [p * p] in [0, p); train [p * p]: 1 for a training input. Throws
// ConfigError when the training or the held-out part is empty.
FourierLosses fourier_losses(const std::vector<double>& logits, int64_t p,
                             const std::vector<int64_t>& answers, const std::vector<uint8_t>& train,
                             const std::vector<int64_t>& frequencies);

// A modular task's data as its model reads it: each row of the batches one pair (a, b), number
// x the token first_number + x (the sequence tasks' layout, data/sequence_task.h), the answer
// read where the row's first target is.
struct ModularPairs {
  int64_t modulus = 0;  // p
  nn::SequenceBatch train, heldout;
  int64_t first_number = 1;
};

struct FourierOptions {
  double share = 0.9;              // the key frequencies' share of the embedding's spectrum
  double neuron_threshold = 0.85;  // a neuron's share that puts it in a frequency's cluster
  int64_t batch_rows = 2048;       // pairs per forward pass
  // When given, the key frequencies the losses use instead of the embedding's: Nanda fixes the
  // final model's for every checkpoint of a run's curve.
  std::vector<int64_t> key_frequencies = {};
};

struct FourierAnalysis {
  int64_t modulus = 0;
  std::vector<double> basis;            // [p, p]
  std::vector<double> embedding_norms;  // [K + 1]
  KeyFrequencies key;
  NeuronClusters neurons;           // of blocks.0.ffn.hook_post at the answer position
  std::vector<double> logit_norms;  // [K + 1, K + 1]
  FourierLosses losses;
};

// The whole analysis of a decoder whose first block has a feed-forward sublayer, run without a
// graph in the model's current mode over every pair of `pairs`. Throws ConfigError for another
// model, a modulus the basis refuses, batches that are not the p * p pairs (each once) or whose
// answers are not numbers, and as the functions above.
FourierAnalysis analyze_fourier(const nn::SequenceModel& model, const ModularPairs& pairs,
                                const FourierOptions& options = {});

}  // namespace gradlab::interp
