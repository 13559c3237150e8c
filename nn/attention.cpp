// Multi-head attention as a composition of differentiable ops: no hand-written backward.
#include "nn/attention.h"

#include <cmath>
#include <limits>

#include "autograd/attention.h"
#include "autograd/ops.h"

namespace gradlab::nn {
namespace {

// [Tq, Tk], true where key j comes after query i.
Mask causal_mask(int64_t tq, int64_t tk) {
  Mask mask({tq, tk}, std::vector<uint8_t>(tq * tk, 0));
  for (int64_t i = 0; i < tq; ++i) {
    for (int64_t j = i + 1; j < tk; ++j) mask.values[i * tk + j] = 1;
  }
  return mask;
}

// scores [B, H, Tq, Tk] with -inf wherever a key is hidden from a query (softmax then gives it
// weight 0), plus the additive mask. Each mask keeps its own shape and broadcasts.
Tensor masked(Tensor scores, const AttentionMasks& masks) {
  constexpr double minus_inf = -std::numeric_limits<double>::infinity();
  const int64_t B = scores.size(0), Tq = scores.size(2), Tk = scores.size(3);
  if (masks.causal) scores = masked_fill(scores, causal_mask(Tq, Tk), minus_inf);  // [Tq, Tk]
  if (masks.key_padding_mask) {
    // [B, Tk] read as [B, 1, 1, Tk]: the same keys are padding for every head and query.
    const Mask padding({B, 1, 1, Tk}, masks.key_padding_mask->values);
    scores = masked_fill(scores, padding, minus_inf);
  }
  if (masks.attn_mask) scores = masked_fill(scores, *masks.attn_mask, minus_inf);
  if (masks.additive_mask.defined()) scores = scores + masks.additive_mask;
  return scores;
}

// Whether NumPy's rule (axes aligned on the right) broadcasts shape to target, unchanged.
bool broadcasts_to(const Shape& shape, const Shape& target) {
  if (shape.size() > target.size()) return false;
  const size_t skipped = target.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != 1 && shape[i] != target[skipped + i]) return false;
  }
  return true;
}

// scores_shape: [B, H, Tq, Tk].
void check_masks(const AttentionMasks& masks, const Shape& scores_shape) {
  const Shape keys{scores_shape[0], scores_shape[3]};  // [B, Tk]
  if (masks.key_padding_mask && masks.key_padding_mask->shape != keys) {
    throw ShapeError("MultiHeadAttention: key_padding_mask " +
                     to_string(masks.key_padding_mask->shape) +
                     " does not match [B, Tk] = " + to_string(keys));
  }
  auto check_broadcast = [&](const char* name, const Shape& shape) {
    if (!broadcasts_to(shape, scores_shape)) {
      throw ShapeError(std::string("MultiHeadAttention: ") + name + " " + to_string(shape) +
                       " does not broadcast to [B, H, Tq, Tk] = " + to_string(scores_shape));
    }
  };
  if (masks.attn_mask) check_broadcast("attn_mask", masks.attn_mask->shape);
  if (masks.additive_mask.defined()) check_broadcast("additive_mask", masks.additive_mask.shape());
}

}  // namespace

MultiHeadAttention::MultiHeadAttention(const AttentionConfig& config, Generator& gen,
                                       std::shared_ptr<Generator> dropout_gen)
    : d_model_(config.d_model),
      num_heads_(config.num_heads),
      num_kv_heads_(config.num_kv_heads == 0 ? config.num_heads : config.num_kv_heads) {
  if (d_model_ <= 0 || num_heads_ <= 0 || num_kv_heads_ <= 0) {
    throw ConfigError("MultiHeadAttention: d_model " + std::to_string(d_model_) + ", num_heads " +
                      std::to_string(num_heads_) + " and num_kv_heads " +
                      std::to_string(num_kv_heads_) + " must be positive");
  }
  if (d_model_ % num_heads_ != 0) {
    throw ConfigError("MultiHeadAttention: d_model " + std::to_string(d_model_) +
                      " is not divisible by num_heads " + std::to_string(num_heads_));
  }
  if (num_heads_ % num_kv_heads_ != 0) {
    throw ConfigError("MultiHeadAttention: num_heads " + std::to_string(num_heads_) +
                      " is not divisible by num_kv_heads " + std::to_string(num_kv_heads_));
  }
  head_dim_ = d_model_ / num_heads_;
  const int64_t kv_width = num_kv_heads_ * head_dim_;
  q_proj =
      register_module("q_proj", std::make_shared<Linear>(d_model_, d_model_, gen, config.bias));
  k_proj =
      register_module("k_proj", std::make_shared<Linear>(d_model_, kv_width, gen, config.bias));
  v_proj =
      register_module("v_proj", std::make_shared<Linear>(d_model_, kv_width, gen, config.bias));
  out_proj =
      register_module("out_proj", std::make_shared<Linear>(d_model_, d_model_, gen, config.bias));
  drop_ = register_module("attn_drop", std::make_shared<Dropout>(config.dropout, dropout_gen));
  qkv_proj_ = std::make_unique<StackedLinear>(std::vector{q_proj, k_proj, v_proj});
}

Tensor MultiHeadAttention::forward(const Tensor& x, const AttentionMasks& masks) const {
  return attend(x, x, masks, nullptr, false).output;
}

Tensor MultiHeadAttention::forward(const Tensor& query, const Tensor& key_value,
                                   const AttentionMasks& masks) const {
  return attend(query, key_value, masks, nullptr, false).output;
}

AttentionOutput MultiHeadAttention::forward_with_weights(const Tensor& query,
                                                         const Tensor& key_value,
                                                         const AttentionMasks& masks,
                                                         AttentionTrace* trace) const {
  return attend(query, key_value, masks, trace, true);
}

AttentionOutput MultiHeadAttention::attend(const Tensor& query, const Tensor& key_value,
                                           const AttentionMasks& masks, AttentionTrace* trace,
                                           bool need_weights) const {
  for (const Tensor* t : {&query, &key_value}) {
    if (t->rank() != 3 || t->size(-1) != d_model_) {
      throw ShapeError("MultiHeadAttention: " + std::string(t == &query ? "query " : "key_value ") +
                       to_string(t->shape()) + " is not [B, T, C] with C = d_model " +
                       std::to_string(d_model_));
    }
  }
  if (query.size(0) != key_value.size(0)) {
    throw ShapeError("MultiHeadAttention: batch sizes differ: query " + to_string(query.shape()) +
                     ", key_value " + to_string(key_value.shape()));
  }
  const int64_t B = query.size(0), Tq = query.size(1), Tk = key_value.size(1);
  const int64_t H = num_heads_, KV = num_kv_heads_, G = H / KV, D = head_dim_;
  // Checked once here, for both paths; each reads the masks as they are.
  check_masks(masks, {B, H, Tq, Tk});

  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const bool dropout_active = drop_->p > 0 && drop_->is_training();
  if (!trace && !dropout_active && !masks.additive_mask.defined()) {
    // The fused kernel reads the heads in place ([B, T, H, D]) and computes the same thing as
    // the composed ops below, which it is tested against.
    const AttentionMaskSpec spec{
        .causal = masks.causal,
        .key_padding = masks.key_padding_mask ? &*masks.key_padding_mask : nullptr,
        .attn_mask = masks.attn_mask ? &*masks.attn_mask : nullptr};
    FusedAttention fused;
    if (query.same(key_value)) {
      // Self-attention projects X once by the three weights stacked: one GEMM forward and one
      // backward instead of three each, and no sum of three gradients for X.
      const Tensor qkv = qkv_proj_->forward(query);  // [B, T, (H + 2 KV) * D]
      fused = fused_attention_packed(reshape(qkv, {B, Tq, H + 2 * KV, D}), H, KV, spec, scale,
                                     need_weights);
    } else {
      fused = fused_attention(reshape(q_proj->forward(query), {B, Tq, H, D}),
                              reshape(k_proj->forward(key_value), {B, Tk, KV, D}),
                              reshape(v_proj->forward(key_value), {B, Tk, KV, D}), spec, scale,
                              need_weights);
    }
    return {out_proj->forward(reshape(fused.output, {B, Tq, H * D})), fused.weights};
  }

  // Project first: each head reads its own learned subspace of X.
  const Tensor q = q_proj->forward(query);      // [B, Tq, H*D]
  const Tensor k = k_proj->forward(key_value);  // [B, Tk, KV*D]
  const Tensor v = v_proj->forward(key_value);  // [B, Tk, KV*D]

  // The composed path, step by step.
  const Tensor q_heads = transpose(reshape(q, {B, Tq, H, D}), 1, 2);   // [B, H, Tq, D]
  const Tensor k_heads = transpose(reshape(k, {B, Tk, KV, D}), 1, 2);  // [B, KV, Tk, D]
  const Tensor v_heads = transpose(reshape(v, {B, Tk, KV, D}), 1, 2);  // [B, KV, Tk, D]

  // The G query heads of a group share one K/V head: an axis of size 1 broadcasts it.
  const Tensor q_groups = reshape(q_heads, {B, KV, G, Tq, D});
  const Tensor k_t = reshape(transpose(k_heads, -2, -1), {B, KV, 1, D, Tk});
  const Tensor scores = reshape(matmul(q_groups, k_t), {B, H, Tq, Tk});  // [B, H, Tq, Tk]
  const Tensor scaled = scores * scale;

  const Tensor weights = softmax(masked(scaled, masks), -1);  // along Tk: each query spreads 1
  const Tensor dropped = drop_->forward(weights);

  const Tensor v_groups = reshape(v_heads, {B, KV, 1, Tk, D});
  const Tensor heads =
      reshape(matmul(reshape(dropped, {B, KV, G, Tq, Tk}), v_groups), {B, H, Tq, D});
  const Tensor concat = reshape(transpose(heads, 1, 2), {B, Tq, H * D});  // [B, Tq, C]
  const Tensor output = out_proj->forward(concat);                        // [B, Tq, C]

  if (trace) {
    *trace = {q, k, v, q_heads, k_heads, v_heads, scores, scaled, weights, heads, concat, output};
  }
  return {output, weights};
}

}  // namespace gradlab::nn
