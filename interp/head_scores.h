// The standard head scores of interpretability work, for every attention head of a model:
// previous-token, duplicate-token and induction, measured as TransformerLens measures them, on
// sequences of n random tokens repeated twice. docs/hooks.md ("Head scores") has the definitions
// and the command line's `gradlab heads`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/sequence_model.h"

namespace gradlab::interp {

struct HeadScoreOptions {
  // n, the tokens of one copy; 0: as many as the positions allow, floor(max_len / 2).
  int64_t length = 0;
  int64_t sequences = 64;  // B, the random sequences the scores are averaged over
  uint64_t seed = 0;       // of the Generator that draws the tokens
};

// The scores of one attention point's heads, each in [0, 1].
struct LayerHeadScores {
  std::string point;  // "blocks.1.attn.hook_pattern"
  // One per head: the mean attention weight from query i to key i - 1 (over every i >= 1), to
  // key i - n (over the second copy, i in [n, 2n)), and to key i - n + 1 (the same queries).
  std::vector<double> previous_token, duplicate_token, induction;
};

// The longest n the model's positions hold twice: floor(max_len / 2) (max_len bounds the
// encoder's source and the decoder's inputs alike).
int64_t max_head_score_length(const nn::SequenceModel& model);

// n for these options: options.length, or max_head_score_length when it is 0. Throws
// ConfigError naming the length and the limit when n < 2 or n exceeds that limit.
int64_t head_score_length(const nn::SequenceModel& model, const HeadScoreOptions& options);

// The tokens head_scores reads, [B, 2n]: options.sequences rows of n tokens from [0, V) drawn
// by Generator(options.seed), each row followed by itself. The n tokens of a row are distinct
// when n <= V, so that the duplicate and induction targets are the only earlier keys holding the
// query's token (when n > V, tokens repeat and the scores count only the one target). Throws as
// head_score_length, and ConfigError for fewer than one sequence.
Indices head_score_tokens(const nn::SequenceModel& model, const HeadScoreOptions& options);

// The scores of every hook_pattern point of model, in the order the forward pass meets them
// (the encoder-decoder's encoder self-attention, decoder self-attention and cross-attention).
//
// The model reads head_score_tokens: the decoder-only model as its inputs (no targets), the
// encoder-decoder as its source and decoder inputs both, so that every pattern, cross-attention
// included, has Tq = Tk = 2n and is scored by position.
//
// Runs in evaluation mode (no dropout) without a graph, and leaves the model in training mode,
// as greedy_decode does. Throws as head_score_tokens, ConfigError for a model with no
// hook_pattern point, and ShapeError for a pattern that is not [B, H, 2n, 2n].
std::vector<LayerHeadScores> head_scores(nn::SequenceModel& model, const HeadScoreOptions& options);

// The same three scores on sequences of a data set, by the tokens (TransformerLens's
// detect_head): for each query i, the weight on key i - 1 (previous token), on the earlier keys
// holding i's token (duplicate token) and on the keys just after those (induction), averaged
// over the queries that have such a key. On head_score_tokens of distinct tokens they are
// head_scores' own. Sums run batch by batch, so that a data set streams.
class HeadScoreReduction {
 public:
  // The patterns of the points of one batch, [B, H, T, T] each, and the tokens [B, T] it read.
  // Throws ShapeError for a pattern that is not [B, H, T, T] of tokens' B and T.
  void add(const std::vector<std::string>& points, const std::vector<Tensor>& patterns,
           const Indices& tokens);
  std::vector<LayerHeadScores> scores() const;

 private:
  struct Sums {
    std::string point;
    std::vector<double> sum[3];  // [H] per kind: previous, duplicate, induction
    int64_t queries[3] = {0, 0, 0};
  };
  std::vector<Sums> sums_;
};

}  // namespace gradlab::interp
