// Multi-head attention, as the attention tutorials describe it (shapes use their letters):
//
//   query [B, Tq, C], key_value [B, Tk, C]
//   Q = query W_Q^T + b_Q [B, Tq, H*D]   K, V = key_value W_K^T.. [B, Tk, KV*D]
//   reshape [B, T, H, D], transpose -> [B, H, T, D]       (heads come from projections, not X)
//   scores = Q K^T / sqrt(D)               [B, H, Tq, Tk]
//   the score modifier, if any              [B, H, Tq, Tk]   (ALiBi's bias; nn/score_modifier.h)
//   masks -> -inf, softmax along Tk         [B, H, Tq, Tk]
//   weights @ V                             [B, H, Tq, D]
//   transpose, reshape                      [B, Tq, C]   then W_O -> [B, Tq, C]
//
// Grouped-query attention: num_kv_heads KV divides H; query head h reads K/V head h / (H / KV)
// (KV = H is standard MHA, KV = 1 is MQA). Parameters: 4C^2 (+4C biases) for standard MHA,
// independent of H; 2C^2 + 2*C*KV*D (+ biases) with grouped K/V heads.
//
// Without a trace, dropout, an additive mask or a score modifier, the fused kernel
// (autograd/attention.h) computes the same thing without the transposed copies; in self-attention
// (key_value is query itself) X is projected once by the three weights stacked (StackedLinear),
// still three named parameters.
//
// A query row whose keys are all masked has weights of 0 everywhere, so its attention result
// (before W_O, which then adds its bias) is 0 and no gradient flows through it: never NaN.
#pragma once

#include <memory>
#include <optional>

#include "autograd/indices.h"
#include "nn/layers.h"
#include "nn/score_modifier.h"
#include "nn/stacked_linear.h"

namespace gradlab::nn {

struct AttentionConfig {
  int64_t d_model = 64;      // C
  int64_t num_heads = 4;     // H; C must be divisible by H
  int64_t num_kv_heads = 0;  // KV; 0 means H
  bool bias = true;          // on all four projections
  double dropout = 0.0;      // on the attention weights, in training mode
};

// Which keys each query may read. Checked once per call against its sizes; both paths then read
// these fields as they are (the fused kernel through an AttentionMaskSpec pointing at them), and
// no combined copy is made.
struct AttentionMasks {
  bool causal = false;                   // query i sees keys j <= i
  std::optional<Mask> key_padding_mask;  // [B, Tk], true = padding, never attended
  std::optional<Mask> attn_mask;         // broadcastable to [B, H, Tq, Tk], true = masked
  Tensor additive_mask;                  // broadcastable to [B, H, Tq, Tk], added to scores
};

// Every intermediate of one forward pass, for `gradlab explain` and for teaching.
struct AttentionTrace {
  Tensor q, k, v;                    // [B, Tq, H*D], [B, Tk, KV*D], [B, Tk, KV*D]
  Tensor q_heads, k_heads, v_heads;  // [B, H, Tq, D], [B, KV, Tk, D], [B, KV, Tk, D]
  Tensor scores, scaled_scores;      // [B, H, Tq, Tk]
  Tensor modified_scores;            // [B, H, Tq, Tk]: scaled_scores after the score modifier
  Tensor weights;                    // [B, H, Tq, Tk]
  Tensor head_outputs;               // [B, H, Tq, D]
  Tensor concat;                     // [B, Tq, C]
  Tensor output;                     // [B, Tq, C]
};

struct AttentionOutput {
  Tensor output;   // [B, Tq, C]
  Tensor weights;  // [B, H, Tq, Tk], per head (not averaged)
};

// The keys and values of the tokens a generating model has read so far, per K/V head.
struct KVCache {
  Tensor keys;    // [B, KV, T, D]
  Tensor values;  // [B, KV, T, D]
  int64_t length() const { return keys.defined() ? keys.size(2) : 0; }
};

// The longest key sequence, among sequences of up to max_keys, for which attention in training
// keeps its [B, H, Tq, Tk] weights for the backward pass. The composed path (which dropout
// takes) and the fused per-head kernel keep them; from kernels::attention_tiles_min_keys keys on,
// the fused op takes the tiled kernel, which keeps one log-sum-exp per query row instead: memory
// linear in T, so that the size of the weights limits only the shorter sequences.
int64_t longest_keys_with_weights(int64_t max_keys, bool causal, double dropout);

class MultiHeadAttention : public Module {
 public:
  // Throws ConfigError if C is not divisible by H or H by KV. A score modifier (null: none) is
  // applied to every call's scores and is the submodule "score_modifier".
  MultiHeadAttention(const AttentionConfig& config, Generator& gen,
                     std::shared_ptr<Generator> dropout_gen = nullptr,
                     std::shared_ptr<ScoreModifier> modifier = nullptr);

  // Self-attention: x [B, T, C] -> [B, T, C].
  Tensor forward(const Tensor& x, const AttentionMasks& masks = {}) const;
  // Cross-attention: query [B, Tq, C] attends over key_value [B, Tk, C].
  Tensor forward(const Tensor& query, const Tensor& key_value,
                 const AttentionMasks& masks = {}) const;
  // As above, also returning the weights; fills *trace with every step when given. Without
  // dropout, trace, additive mask or score modifier this runs the fused kernel
  // (autograd/attention.h); with any of them, the composed ops, step by step as in the tutorials.
  // Throws ShapeError if the inputs are not [B, T, C] or a mask does not fit [B, H, Tq, Tk].
  AttentionOutput forward_with_weights(const Tensor& query, const Tensor& key_value,
                                       const AttentionMasks& masks = {},
                                       AttentionTrace* trace = nullptr) const;

  // Attention whose heads read inputs of their own (a block's split inputs, already normalised):
  // q_input [B, Tq, H, C], k_input and v_input [B, Tk, KV, C]. Head h's query is its copy times
  // its own rows of W_Q (K/V head g's keys and values likewise), so that editing one copy moves
  // that head alone. The composed path, whose points all fire; equal to forward() when every
  // copy is the same [B, T, C] input.
  AttentionOutput forward_split(const Tensor& q_input, const Tensor& k_input, const Tensor& v_input,
                                const AttentionMasks& masks = {}) const;

  // Causal self-attention of new tokens x [B, Tn, C], which follow the cache.length() tokens in
  // `cache`, over those and themselves; appends the new tokens' keys and values to the cache.
  // The result is what forward(whole sequence, causal) gives at the new positions, at the cost
  // of the new queries only: for generation, one token at a time.
  Tensor forward_incremental(const Tensor& x, KVCache& cache) const;

  int64_t num_heads() const { return num_heads_; }
  int64_t num_kv_heads() const { return num_kv_heads_; }
  int64_t head_dim() const { return head_dim_; }

  std::shared_ptr<Linear> q_proj, k_proj, v_proj, out_proj;
  std::shared_ptr<ScoreModifier> score_modifier;  // null: none

 private:
  // The tutorial's steps, one op each.
  AttentionOutput attend_composed(const Tensor& query, const Tensor& key_value,
                                  const AttentionMasks& masks, AttentionTrace* trace) const;
  // The tutorial's steps from the per-head projections q [B, Tq, H, D], k, v [B, Tk, KV, D] on.
  AttentionOutput attend_projected(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const AttentionMasks& masks, AttentionTrace* trace) const;
  // Checks the inputs and masks, then picks a path; without need_weights the fused kernel may
  // leave the weights out.
  AttentionOutput attend(const Tensor& query, const Tensor& key_value, const AttentionMasks& masks,
                         AttentionTrace* trace, bool need_weights) const;
  // Whether a hook or cache reads one of the points only the composed path has.
  bool internals_hooked() const;
  // W_O applied per head (hook_result [B, Tq, H, C]) and summed, plus W_O's bias: z [B, Tq, H, D]
  // -> [B, Tq, C]. Only when hook_result is read: the sum's order differs from one product's.
  Tensor sum_of_head_results(const Tensor& z) const;
  // What attend_composed computes, by the fused kernel.
  AttentionOutput attend_fused(const Tensor& query, const Tensor& key_value,
                               const AttentionMasks& masks, bool need_weights) const;

  int64_t d_model_, num_heads_, num_kv_heads_, head_dim_;
  std::shared_ptr<Dropout> drop_;
  std::unique_ptr<StackedLinear> qkv_proj_;  // q_proj, k_proj, v_proj as one product
};

}  // namespace gradlab::nn
