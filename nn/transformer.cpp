// Residual wiring of the transformer block.
#include "nn/transformer.h"

#include "autograd/ops.h"
#include "nn/hooks.h"
#include "nn/module_registry.h"

namespace gradlab::nn {

Tensor residual_add(const Tensor& x, const Tensor& sublayer_output, const char* sublayer) {
  if (x.shape() != sublayer_output.shape()) {
    throw ShapeError(std::string("TransformerBlock: residual shapes differ: input ") +
                     to_string(x.shape()) + " vs " + sublayer + " output " +
                     to_string(sublayer_output.shape()));
  }
  return x + sublayer_output;
}

AttentionConfig attention_config(const ModelConfig& config) {
  return {.d_model = config.d_model,
          .num_heads = config.attention.num_heads,
          .num_kv_heads = config.attention.num_kv_heads,
          .bias = config.bias,
          .dropout = config.dropout};
}

TransformerBlock::TransformerBlock(const ModelConfig& config, Generator& gen,
                                   std::shared_ptr<Generator> dropout_gen, BlockAttention attention)
    : pre_norm_(config.block.pre_norm) {
  if (config.feed_forward.d_ff < 0) {
    throw ConfigError(
        "TransformerBlock: d_ff must be positive, or 0 for attention-only blocks, got " +
        std::to_string(config.feed_forward.d_ff));
  }
  // A misspelt activation is an error with or without ffn.
  activation_kind(config.feed_forward.activation);
  const auto add_norm = [&](const char* name) {
    return register_module(name, make_norm(config.d_model, config));
  };
  ln1 = add_norm("ln1");
  // The score modifier first: a modifier with parameters draws them before the projections.
  std::shared_ptr<ScoreModifier> modifier = make_score_modifier(config, gen);
  attn = register_module("attn", std::make_shared<MultiHeadAttention>(attention_config(config), gen,
                                                                      dropout_gen, modifier));
  if (attention == BlockAttention::SelfAndCross) {
    ln_cross = add_norm("ln_cross");
    cross_attn = register_module("cross_attn", std::make_shared<MultiHeadAttention>(
                                                   attention_config(config), gen, dropout_gen));
  }
  if (config.feed_forward.d_ff > 0) {
    ln2 = add_norm("ln2");
    ffn = register_module("ffn", make_feed_forward(config, gen));
  }
  drop_ = register_module("drop", std::make_shared<Dropout>(config.dropout, dropout_gen));
}

Tensor TransformerBlock::sublayer(const Tensor& h, const Norm* norm, const char* name,
                                  const char* out_point,
                                  const std::function<Tensor(const Tensor&)>& body) const {
  const auto normalized = [norm](const Tensor& x) { return norm ? norm->forward(x) : x; };
  if (pre_norm_) {
    return residual_add(h, hook_point(*this, out_point, drop_->forward(body(normalized(h)))), name);
  }
  return normalized(residual_add(h, hook_point(*this, out_point, drop_->forward(body(h))), name));
}

Tensor TransformerBlock::feed_forward(const Tensor& h) const {
  if (!ffn) return h;
  return sublayer(h, ln2.get(), "feed-forward", "hook_mlp_out",
                  [&](const Tensor& in) { return ffn->forward(in); });
}

Tensor TransformerBlock::forward_incremental(const Tensor& x, KVCache& cache) const {
  if (cross_attn) {
    throw ShapeError(
        "TransformerBlock: generation reads running text; this block has "
        "cross-attention");
  }
  const Tensor h = sublayer(x, ln1.get(), "attention", "hook_attn_out",
                            [&](const Tensor& in) { return attn->forward_incremental(in, cache); });
  return feed_forward(h);
}

Tensor TransformerBlock::forward(const Tensor& x, const AttentionMasks& self_masks,
                                 const Tensor& memory, const AttentionMasks& memory_masks,
                                 Tensor* self_weights, Tensor* cross_weights) const {
  if (cross_weights && !cross_attn) {
    throw ShapeError("TransformerBlock: cross-attention weights asked of a block without it");
  }
  if (cross_attn && !memory.defined()) {
    throw ShapeError("TransformerBlock: a block with cross-attention needs the encoder memory");
  }
  if (!cross_attn && memory.defined()) {
    throw ShapeError("TransformerBlock: memory given to a block without cross-attention");
  }
  // One attention sublayer's body, keeping its weights when asked.
  auto attend = [](const MultiHeadAttention& attention, const Tensor& query, const Tensor& keys,
                   const AttentionMasks& masks, Tensor* weights) {
    if (!weights) return attention.forward(query, keys, masks);
    AttentionOutput result = attention.forward_with_weights(query, keys, masks);
    *weights = result.weights;
    return result.output;
  };
  Tensor h = hook_point(*this, "hook_resid_pre", x);
  h = sublayer(h, ln1.get(), "attention", "hook_attn_out",
               [&](const Tensor& in) { return attend(*attn, in, in, self_masks, self_weights); });
  h = hook_point(*this, "hook_resid_mid", h);
  if (cross_attn) {
    h = sublayer(h, ln_cross.get(), "cross-attention", "hook_cross_attn_out",
                 [&](const Tensor& in) {
                   return attend(*cross_attn, in, memory, memory_masks, cross_weights);
                 });
    h = hook_point(*this, "hook_resid_mid_cross", h);
  }
  return hook_point(*this, "hook_resid_post", feed_forward(h));
}

}  // namespace gradlab::nn
