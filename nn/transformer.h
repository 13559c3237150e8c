// TransformerBlock: attention and feed-forward sublayers with residual connections.
//
// Pre-LayerNorm (default):  x = x + attn(ln1(x));  x = x + ffn(ln2(x))
// Post-LayerNorm (Vaswani et al.): x = ln1(x + attn(x));  x = ln2(x + ffn(x))
// A decoder block of an encoder-decoder model adds cross-attention over the encoder output
// (`memory`) between the two, with its own LayerNorm (ln_cross). With norm "none" both wirings
// are plain residual sums, x = x + attn(x); x = x + ffn(x); with d_ff = 0 the block is
// attention-only (no ffn, no ln2).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "nn/attention.h"
#include "nn/layers.h"

namespace gradlab::nn {

struct BlockConfig {
  AttentionConfig attention;  // its `bias` also sets the LayerNorm and feed-forward biases
  int64_t d_ff = 256;         // 0: no feed-forward sublayer (attention-only)
  bool pre_norm = true;
  std::string norm = kLayerNorm;   // a row of norm_kinds() (nn/layers.h)
  std::string activation = kGelu;  // a row of activation_kinds(), for the feed-forward
  bool cross_attention = false;
  double dropout = 0.0;  // after each sublayer, before the residual addition
};

class TransformerBlock : public Module {
 public:
  // Throws ConfigError for a negative d_ff or an unknown norm or activation.
  TransformerBlock(const BlockConfig& config, Generator& gen,
                   std::shared_ptr<Generator> dropout_gen = nullptr);

  // x [B, T, C]; memory [B, S, C] is required exactly when the block has cross-attention.
  // With self_weights, stores the self-attention weights [B, H, T, T] there; with
  // cross_weights, the cross-attention weights [B, H, T, S].
  Tensor forward(const Tensor& x, const AttentionMasks& self_masks = {},
                 const Tensor& memory = Tensor(), const AttentionMasks& memory_masks = {},
                 Tensor* self_weights = nullptr, Tensor* cross_weights = nullptr) const;

  // Generation: the block over new tokens x [B, Tn, C] that follow those in the self-attention
  // cache (causal, no cross-attention, evaluation mode). Appends to the cache.
  Tensor forward_incremental(const Tensor& x, KVCache& cache) const;

  std::shared_ptr<LayerNorm> ln1, ln_cross, ln2;  // null with norm "none"; ln2 without ffn
  std::shared_ptr<MultiHeadAttention> attn, cross_attn;
  std::shared_ptr<FeedForward> ffn;  // null when d_ff = 0

 private:
  // h plus body of the sublayer, with its norm (if any) before (pre-LN) or after (post-LN); the
  // sublayer's output (after dropout, before the sum) is the hook point out_point.
  Tensor sublayer(const Tensor& h, const LayerNorm* norm, const char* name, const char* out_point,
                  const std::function<Tensor(const Tensor&)>& body) const;
  // h, then the feed-forward sublayer when the block has one.
  Tensor feed_forward(const Tensor& h) const;

  bool pre_norm_;
  std::shared_ptr<Dropout> drop_;
};

// x + sublayer_output, with a clear error naming the sublayer if the shapes differ (a changed
// layer that alters the width would otherwise broadcast silently or fail obscurely).
Tensor residual_add(const Tensor& x, const Tensor& sublayer_output, const char* sublayer);

}  // namespace gradlab::nn
