// TransformerBlock: attention and feed-forward sublayers with residual connections.
//
// Pre-norm (default):  x = x + attn(ln1(x));  x = x + ffn(ln2(x))
// Post-norm (Vaswani et al.): x = ln1(x + attn(x));  x = ln2(x + ffn(x))
// A decoder block of an encoder-decoder model adds cross-attention over the encoder output
// (`memory`) between the two, with its own norm (ln_cross). The norms, the self-attention's
// score modifier and the feed-forward are the registered modules the config names
// (nn/module_registry.h); cross-attention has no score modifier. With norm "none" both
// wirings are plain residual sums, x = x + attn(x); x = x + ffn(x); with d_ff = 0 the block is
// attention-only (no ffn, no ln2).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "nn/attention.h"
#include "nn/layers.h"
#include "nn/model_options.h"

namespace gradlab::nn {

// What a block's attention reads: itself, or itself and then the encoder's output.
enum class BlockAttention { Self, SelfAndCross };

// The attention of a model built from config (its width, heads, biases and dropout).
AttentionConfig attention_config(const ModelConfig& config);

class TransformerBlock : public Module {
 public:
  // The block of a model built from config; dropout after each sublayer, before the residual
  // addition, draws from dropout_gen. Throws ConfigError for a negative d_ff or a norm, score
  // modifier, feed-forward or activation that is not registered.
  TransformerBlock(const ModelConfig& config, Generator& gen,
                   std::shared_ptr<Generator> dropout_gen = nullptr,
                   BlockAttention attention = BlockAttention::Self);

  // x [B, T, C]; memory [B, S, C] is required exactly when the block has cross-attention.
  // With self_weights, stores the self-attention weights [B, H, T, T] there; with
  // cross_weights, the cross-attention weights [B, H, T, S].
  Tensor forward(const Tensor& x, const AttentionMasks& self_masks = {},
                 const Tensor& memory = Tensor(), const AttentionMasks& memory_masks = {},
                 Tensor* self_weights = nullptr, Tensor* cross_weights = nullptr) const;

  // The block's output [B, T - first, C] at positions [first, T) of x [B, T, C] alone, under a
  // causal self-attention: the keys and values read every position, while the queries, W_O and
  // the feed-forward run at those positions only. Equal to forward(x, causal) there, up to
  // rounding; for a last block whose earlier positions cannot reach the loss. No hook point
  // fires (the caller runs it without hooks); dropout, if training, draws other masks.
  Tensor forward_last_positions(const Tensor& x, int64_t first) const;

  // Generation: the block over new tokens x [B, Tn, C] that follow those in the self-attention
  // cache (causal, no cross-attention, evaluation mode). Appends to the cache.
  Tensor forward_incremental(const Tensor& x, KVCache& cache) const;

  std::shared_ptr<Norm> ln1, ln_cross, ln2;  // null with norm "none"; ln2 without ffn
  std::shared_ptr<MultiHeadAttention> attn, cross_attn;
  std::shared_ptr<Sublayer> ffn;  // null when d_ff = 0

 private:
  // The points of an attention sublayer's split inputs (nn/hook_points.h); attn_in null: none.
  struct SplitPoints {
    const char* attn_in;
    const char* q;
    const char* k;
    const char* v;
  };
  // h plus the sublayer's body(h), with norm after the sum in a post-norm block; the body's
  // output (after dropout, before the sum) is the hook point out_point. The body applies the
  // pre-norm itself (pre_normalized), so that split inputs are taken before it.
  Tensor sublayer(const Tensor& h, const Norm* norm, const char* name, const char* out_point,
                  const std::function<Tensor(const Tensor&)>& body) const;
  // x through norm in a pre-norm block; x itself in a post-norm block or without the norm.
  Tensor pre_normalized(const Norm* norm, const Tensor& x) const;
  // The attention sublayer's body: attention of stream over itself (memory undefined) or over
  // memory. When a hook replaces one of the split inputs (or a cache reads its gradient), each
  // head reads a copy of its own, taken before the pre-norm and normalised on its own
  // (MultiHeadAttention::forward_split); when they are only cached, the copies are recorded and
  // the attention runs as without hooks. Keeps the weights in *weights when given.
  Tensor attention_body(const MultiHeadAttention& attention, const Norm* norm,
                        const SplitPoints& points, const Tensor& stream, const Tensor& memory,
                        const AttentionMasks& masks, Tensor* weights) const;
  // h, then the feed-forward sublayer when the block has one.
  Tensor feed_forward(const Tensor& h) const;

  bool pre_norm_;
  std::shared_ptr<Dropout> drop_;
};

// x + sublayer_output, with a clear error naming the sublayer if the shapes differ (a changed
// layer that alters the width would otherwise broadcast silently or fail obscurely).
Tensor residual_add(const Tensor& x, const Tensor& sublayer_output, const char* sublayer);

}  // namespace gradlab::nn
