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
  const Tensor sum = residual_add(h, hook_point(*this, out_point, drop_->forward(body(h))), name);
  return pre_norm_ || !norm ? sum : norm->forward(sum);
}

Tensor TransformerBlock::pre_normalized(const Norm* norm, const Tensor& x) const {
  return pre_norm_ && norm ? norm->forward(x) : x;
}

Tensor TransformerBlock::feed_forward(const Tensor& h) const {
  if (!ffn) return h;
  return sublayer(h, ln2.get(), "feed-forward", "hook_mlp_out", [&](const Tensor& in) {
    return ffn->forward(pre_normalized(ln2.get(), hook_point(*this, "hook_mlp_in", in)));
  });
}

namespace {

// x [B, T, C] once per head: [B, T, heads, C].
Tensor head_copies(const Tensor& x, int64_t heads) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  return broadcast_to(reshape(x, {B, T, 1, C}), {B, T, heads, C});
}

// Each K/V head's input under grouped K/V heads: the mean of its query heads' copies
// [B, T, H, C] -> [B, T, KV, C] (query head h belongs to K/V head h / (H / KV)).
Tensor kv_head_copies(const Tensor& per_query_head, int64_t kv_heads) {
  const int64_t B = per_query_head.size(0), T = per_query_head.size(1);
  const int64_t H = per_query_head.size(2), C = per_query_head.size(3);
  if (kv_heads == H) return per_query_head;
  return mean(reshape(per_query_head, {B, T, kv_heads, H / kv_heads, C}), {3});
}

}  // namespace

Tensor TransformerBlock::attention_body(const MultiHeadAttention& attention, const Norm* norm,
                                        const SplitPoints& points, const Tensor& stream,
                                        const Tensor& memory, const AttentionMasks& masks,
                                        Tensor* weights) const {
  const bool self = !memory.defined();
  const auto any_point = [&](bool (*asks)(const Module&, const char*)) {
    for (const char* point : {points.attn_in, points.q, points.k, points.v}) {
      if (point && asks(*this, point)) return true;
    }
    return false;
  };
  const bool split = any_point(hook_replaced);
  if (split || any_point(hook_wanted)) {
    const int64_t H = attention.num_heads(), KV = attention.num_kv_heads();
    Tensor q_input, kv_input;
    if (self) {
      const Tensor attn_in = hook_point(*this, points.attn_in, head_copies(stream, H));
      q_input = hook_point(*this, points.q, attn_in);
      kv_input = kv_head_copies(attn_in, KV);
    } else {
      // Cross-attention: the queries read the decoder's stream, the keys and values the
      // encoder's output, which no norm of this block touches.
      q_input = hook_point(*this, points.q, head_copies(stream, H));
      kv_input = head_copies(memory, KV);
    }
    const Tensor k_input = hook_point(*this, points.k, kv_input);
    const Tensor v_input = hook_point(*this, points.v, kv_input);
    if (split) {
      const Norm* before = pre_norm_ ? norm : nullptr;
      const auto normalized = [&](const Tensor& x, bool of_stream) {
        return before && of_stream ? before->normalize_copies(x) : x;
      };
      AttentionOutput result = attention.forward_split(
          normalized(q_input, true), normalized(k_input, self), normalized(v_input, self), masks);
      if (weights) *weights = result.weights;
      return result.output;
    }
  }
  const Tensor query = pre_normalized(norm, stream);
  const Tensor& key_value = self ? query : memory;
  if (!weights) return attention.forward(query, key_value, masks);
  AttentionOutput result = attention.forward_with_weights(query, key_value, masks);
  *weights = result.weights;
  return result.output;
}

Tensor TransformerBlock::forward_last_positions(const Tensor& x, int64_t first) const {
  if (cross_attn) {
    throw ShapeError("TransformerBlock: forward_last_positions of a block with cross-attention");
  }
  const int64_t T = x.size(1), Tq = T - first;
  // The causal rule with the queries at positions first..T-1: query i hides keys after first + i.
  AttentionMasks later_keys;
  later_keys.attn_mask = Mask({Tq, T}, std::vector<uint8_t>(Tq * T, 0));
  for (int64_t i = 0; i < Tq; ++i) {
    for (int64_t j = first + i + 1; j < T; ++j) later_keys.attn_mask->values[i * T + j] = 1;
  }
  // A norm acts on each position alone: normalising all of them, then taking the queries' rows,
  // is normalising those rows.
  const Tensor key_value = pre_normalized(ln1.get(), x);  // [B, T, C]
  const Tensor query = narrow(key_value, 1, first, Tq);   // [B, Tq, C]
  const Tensor attended = drop_->forward(attn->forward(query, key_value, later_keys));
  const Tensor sum = residual_add(narrow(x, 1, first, Tq), attended, "attention");
  return feed_forward(pre_norm_ || !ln1 ? sum : ln1->forward(sum));  // [B, Tq, C]
}

Tensor TransformerBlock::forward_incremental(const Tensor& x, KVCache& cache) const {
  if (cross_attn) {
    throw ShapeError(
        "TransformerBlock: generation reads running text; this block has "
        "cross-attention");
  }
  const Tensor h = sublayer(x, ln1.get(), "attention", "hook_attn_out", [&](const Tensor& in) {
    return attn->forward_incremental(pre_normalized(ln1.get(), in), cache);
  });
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
  static constexpr SplitPoints self_split{"hook_attn_in", "hook_q_input", "hook_k_input",
                                          "hook_v_input"};
  static constexpr SplitPoints cross_split{nullptr, "hook_cross_q_input", "hook_cross_k_input",
                                           "hook_cross_v_input"};
  Tensor h = hook_point(*this, "hook_resid_pre", x);
  h = sublayer(h, ln1.get(), "attention", "hook_attn_out", [&](const Tensor& in) {
    return attention_body(*attn, ln1.get(), self_split, in, Tensor(), self_masks, self_weights);
  });
  h = hook_point(*this, "hook_resid_mid", h);
  if (cross_attn) {
    h = sublayer(h, ln_cross.get(), "cross-attention", "hook_cross_attn_out",
                 [&](const Tensor& in) {
                   return attention_body(*cross_attn, ln_cross.get(), cross_split, in, memory,
                                         memory_masks, cross_weights);
                 });
    h = hook_point(*this, "hook_resid_mid_cross", h);
  }
  return hook_point(*this, "hook_resid_post", feed_forward(h));
}

}  // namespace gradlab::nn
