// Weight-based circuit analysis (Elhage et al. 2021, "A Mathematical Framework for Transformer
// Circuits"), in TransformerLens's row-vector convention (the residual stream is a row x [1, C]):
// every head's W_QK = W_Q W_K^T and W_OV = W_V W_O [C, C] kept factored through its D
// dimensions, the full circuits through the token embedding W_E [V, C] and unembedding
// W_U [C, V], the copying score, and the Q-, K- and V-composition scores of every pair of heads
// with a baseline of random matrices. docs/circuits.md defines each quantity and what it leaves
// out (biases, norms, positions, the 1 / sqrt(D) of the scores).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "interp/factored_matrix.h"
#include "nn/sequence_model.h"

namespace gradlab::interp {

// The residual stream an attention reads or writes: the decoder's (every attention of a
// decoder-only model) or the encoder's (its self-attention, and cross-attention's keys).
enum class Stream { Decoder, Encoder };

// One attention module's heads.
struct AttentionCircuits {
  std::string name;  // "blocks.1.attn", "decoder.0.cross_attn"
  Stream writes = Stream::Decoder, queries_read = Stream::Decoder, keys_read = Stream::Decoder;
  // Per head h: W_Q^h W_K^g^T and W_V^g W_O^h [C, C], g the K/V head of h's group.
  std::vector<FactoredMatrix> qk, ov;
};

// A model's weights as circuits, float64.
struct ModelCircuits {
  Eigen::MatrixXd embedding;    // W_E [V, C]: the token embedding
  Eigen::MatrixXd unembedding;  // W_U [C, V]: the head's weight transposed (or W_E^T, tied)
  std::vector<AttentionCircuits> attentions;  // in the order the forward pass meets them
  int64_t heads = 0, head_dim = 0;            // H, D
};

// Reads every attention of a decoder-only or encoder-decoder model (self- and cross-attention).
// Throws ConfigError for a model of one's own (no token embedding and head to read) or one
// without attention.
ModelCircuits model_circuits(const nn::SequenceModel& model);

// W_E W_OV^h W_U [V, V] (row t: the logits head h's output adds when it attends to token t) and
// W_E W_QK^h W_E^T [V, V] (entry [s, t]: the score of query token s for key token t), both
// factored through D.
FactoredMatrix full_ov_circuit(const ModelCircuits& circuits, size_t attention, int64_t head);
FactoredMatrix full_qk_circuit(const ModelCircuits& circuits, size_t attention, int64_t head);

// Elhage's copying score of a square matrix (a full OV circuit): sum of its eigenvalues over the
// sum of their magnitudes, in [-1, 1] (1: every eigenvalue positive, the head copies the token
// it attends to). From the factored form's [D, D] eigenvalues.
double copying_score(const FactoredMatrix& full_ov);

// For each row t of a square [V, V] matrix, the rank of its diagonal entry within the row (1:
// the largest; ties count against it).
struct DiagonalRanks {
  double top1 = 0;       // the fraction of rows whose diagonal entry is the largest
  double mean_rank = 0;  // in [1, V]
};
DiagonalRanks diagonal_ranks(const FactoredMatrix& square);

// TransformerLens's all_composition_scores: how much reader head B reads what writer head A
// writes, ||W_OV^A M|| / (||W_OV^A|| ||M||) (Frobenius), M being reader_matrix: W_QK^B (Q),
// W_QK^B^T (K) or W_OV^B (V). In Elhage's column-vector notation: ||W_QK^B^T W_OV^A||,
// ||W_QK^B W_OV^A|| and ||W_OV^B W_OV^A||. NaN when a norm is 0.
enum class Composition { Q, K, V };
inline constexpr std::array<Composition, 3> kCompositions = {Composition::Q, Composition::K,
                                                             Composition::V};
const char* composition_name(Composition kind);  // "q", "k", "v"
FactoredMatrix reader_matrix(const AttentionCircuits& reader, int64_t head, Composition kind);
double composition_score(const FactoredMatrix& writer_ov, const FactoredMatrix& reader);

// The score of kind between random factored matrices of the heads' shapes ([C, D] [D, C],
// standard normal entries): what composition_score gives for heads that ignore each other. The
// mean over `draws` draws of Generator(seed).
double composition_baseline(int64_t width, int64_t head_dim, Composition kind, int64_t draws,
                            uint64_t seed);

struct CircuitOptions {
  int64_t baseline_draws = 16;
  uint64_t seed = 0;  // of the baseline's random matrices
};

// Every number `gradlab circuits` shows and writes. Tables of L attentions and H heads are
// row-major: [L, H], [L, H, D]; pairs [L*H, L*H] with the writer head l*H+h on the rows.
struct CircuitReport {
  std::vector<std::string> attentions;                         // [L]
  int64_t heads = 0, head_dim = 0;                             // H, D
  std::vector<double> ov_norm, qk_norm;                        // [L, H]
  std::vector<double> ov_singular_values, qk_singular_values;  // [L, H, D]
  std::vector<double> copying_score;                           // [L, H], of the full OV circuit
  std::vector<double> diagonal_top1, diagonal_mean_rank;       // [L, H], of the full OV circuit
  // Per kind (Q, K, V): [L*H, L*H], NaN where B cannot read A's output that way (B not after A,
  // or on the other stream of an encoder-decoder).
  std::array<std::vector<double>, 3> composition;
  std::array<double, 3> baseline{};  // per kind
};

// Whether reader attention b reads what writer attention a writes, for this kind of
// composition (a comes before b in the forward pass, and writes the stream b reads).
bool composes(const ModelCircuits& circuits, size_t a, size_t b, Composition kind);

// Throws as model_circuits, and ConfigError for fewer than one baseline draw.
CircuitReport circuit_report(const nn::SequenceModel& model, const CircuitOptions& options = {});

}  // namespace gradlab::interp
