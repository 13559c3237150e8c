// Residual wiring of the transformer block.
#include "nn/transformer.h"

#include "autograd/ops.h"
#include "nn/hooks.h"

namespace gradlab::nn {

Tensor residual_add(const Tensor& x, const Tensor& sublayer_output, const char* sublayer) {
  if (x.shape() != sublayer_output.shape()) {
    throw ShapeError(std::string("TransformerBlock: residual shapes differ: input ") +
                     to_string(x.shape()) + " vs " + sublayer + " output " +
                     to_string(sublayer_output.shape()));
  }
  return x + sublayer_output;
}

TransformerBlock::TransformerBlock(const BlockConfig& config, Generator& gen,
                                   std::shared_ptr<Generator> dropout_gen)
    : pre_norm_(config.pre_norm) {
  const int64_t c = config.attention.d_model;
  ln1 = register_module("ln1", std::make_shared<LayerNorm>(c, 1e-5, config.attention.bias));
  attn = register_module("attn",
                         std::make_shared<MultiHeadAttention>(config.attention, gen, dropout_gen));
  if (config.cross_attention) {
    ln_cross =
        register_module("ln_cross", std::make_shared<LayerNorm>(c, 1e-5, config.attention.bias));
    cross_attn = register_module(
        "cross_attn", std::make_shared<MultiHeadAttention>(config.attention, gen, dropout_gen));
  }
  ln2 = register_module("ln2", std::make_shared<LayerNorm>(c, 1e-5, config.attention.bias));
  ffn = register_module("ffn", std::make_shared<FeedForward>(c, config.d_ff, gen, 0.0, nullptr,
                                                             config.attention.bias));
  drop_ = register_module("drop", std::make_shared<Dropout>(config.dropout, dropout_gen));
}

Tensor TransformerBlock::sublayer(const Tensor& h, const LayerNorm& norm, const char* name,
                                  const char* out_point,
                                  const std::function<Tensor(const Tensor&)>& body) const {
  if (pre_norm_) {
    return residual_add(h, hook_point(*this, out_point, drop_->forward(body(norm.forward(h)))),
                        name);
  }
  return norm.forward(residual_add(h, hook_point(*this, out_point, drop_->forward(body(h))), name));
}

Tensor TransformerBlock::forward_incremental(const Tensor& x, KVCache& cache) const {
  if (cross_attn) {
    throw ShapeError(
        "TransformerBlock: generation reads running text; this block has "
        "cross-attention");
  }
  const Tensor h = sublayer(x, *ln1, "attention", "hook_attn_out",
                            [&](const Tensor& in) { return attn->forward_incremental(in, cache); });
  return sublayer(h, *ln2, "feed-forward", "hook_mlp_out",
                  [&](const Tensor& in) { return ffn->forward(in); });
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
  h = sublayer(h, *ln1, "attention", "hook_attn_out",
               [&](const Tensor& in) { return attend(*attn, in, in, self_masks, self_weights); });
  h = hook_point(*this, "hook_resid_mid", h);
  if (cross_attn) {
    h = sublayer(h, *ln_cross, "cross-attention", "hook_cross_attn_out", [&](const Tensor& in) {
      return attend(*cross_attn, in, memory, memory_masks, cross_weights);
    });
    h = hook_point(*this, "hook_resid_mid_cross", h);
  }
  h = sublayer(h, *ln2, "feed-forward", "hook_mlp_out",
               [&](const Tensor& in) { return ffn->forward(in); });
  return hook_point(*this, "hook_resid_post", h);
}

}  // namespace gradlab::nn
