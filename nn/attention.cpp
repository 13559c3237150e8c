// Multi-head attention. First the tutorial's steps as composed ops (attend_composed: no
// hand-written backward), then the dispatcher that checks the inputs once and picks a path, then
// the fused path, which computes the same in one op (autograd/attention.h) and is tested against
// it.
#include "nn/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/attention.h"
#include "autograd/kernels/attention_tiles.h"
#include "autograd/ops.h"
#include "nn/hook_points.h"
#include "nn/hooks.h"

namespace gradlab::nn {
namespace {

// a [B, H, M, K] @ b [B, KV, K, N] -> [B, H, M, N], query head h using K/V head h / (H / KV).
// With grouped K/V heads (KV < H) the H / KV query heads of a group get an axis of their own,
// over which b's head broadcasts.
Tensor per_head_matmul(const Tensor& a, const Tensor& b) {
  const int64_t B = a.size(0), H = a.size(1), M = a.size(2), K = a.size(3);
  const int64_t KV = b.size(1), N = b.size(3);
  if (KV == H) return matmul(a, b);
  const Tensor grouped = matmul(reshape(a, {B, KV, H / KV, M, K}), reshape(b, {B, KV, 1, K, N}));
  return reshape(grouped, {B, H, M, N});
}

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

}  // namespace

AttentionOutput MultiHeadAttention::attend_composed(const Tensor& query, const Tensor& key_value,
                                                    const AttentionMasks& masks,
                                                    AttentionTrace* trace) const {
  const int64_t B = query.size(0), Tq = query.size(1), Tk = key_value.size(1);
  const int64_t H = num_heads_, KV = num_kv_heads_, D = head_dim_;
  // Project first: each head reads its own learned subspace of X, not a slice of X.
  return attend_projected(reshape(q_proj->forward(query), {B, Tq, H, D}),
                          reshape(k_proj->forward(key_value), {B, Tk, KV, D}),
                          reshape(v_proj->forward(key_value), {B, Tk, KV, D}), masks, trace);
}

AttentionOutput MultiHeadAttention::attend_projected(const Tensor& q_projected,
                                                     const Tensor& k_projected,
                                                     const Tensor& v_projected,
                                                     const AttentionMasks& masks,
                                                     AttentionTrace* trace) const {
  const int64_t B = q_projected.size(0), Tq = q_projected.size(1), Tk = k_projected.size(1);
  const int64_t H = num_heads_, KV = num_kv_heads_, D = head_dim_;
  // The hook points see each head's slice: [B, T, heads, D].
  const Tensor q = hook_point(*this, "hook_q", q_projected);
  const Tensor k = hook_point(*this, "hook_k", k_projected);
  const Tensor v = hook_point(*this, "hook_v", v_projected);

  // Move the heads beside the batch axis.
  const Tensor q_heads = transpose(q, 1, 2);  // [B, H, Tq, D]
  const Tensor k_heads = transpose(k, 1, 2);  // [B, KV, Tk, D]
  const Tensor v_heads = transpose(v, 1, 2);  // [B, KV, Tk, D]

  // Every query against every key, per head; scaled so that the scores' spread does not grow
  // with D.
  const Tensor scores = per_head_matmul(q_heads, transpose(k_heads, -2, -1));  // [B, H, Tq, Tk]
  const Tensor scaled = scores * (1.0 / std::sqrt(static_cast<double>(D)));
  const Tensor modified = score_modifier ? score_modifier->forward(scaled, 0) : scaled;

  // Softmax along Tk: each query spreads a weight of 1 over the keys it may see.
  const Tensor weights = hook_point(
      *this, "hook_pattern",
      softmax(hook_point(*this, "hook_scores", masked(modified, masks)), -1));  // [B, H, Tq, Tk]
  const Tensor dropped = drop_->forward(weights);

  // The weighted sum of the values, the heads side by side again, and W_O to mix them.
  const Tensor heads = per_head_matmul(dropped, v_heads);                // [B, H, Tq, D]
  const Tensor z = hook_point(*this, "hook_z", transpose(heads, 1, 2));  // [B, Tq, H, D]
  const Tensor concat = reshape(z, {B, Tq, H * D});                      // [B, Tq, C]
  const Tensor output = hook_wanted(*this, "hook_result")
                            ? sum_of_head_results(z)
                            : out_proj->forward(concat);  // [B, Tq, C]

  if (trace) {
    *trace = {reshape(q, {B, Tq, H * D}),
              reshape(k, {B, Tk, KV * D}),
              reshape(v, {B, Tk, KV * D}),
              q_heads,
              k_heads,
              v_heads,
              scores,
              scaled,
              modified,
              weights,
              heads,
              concat,
              output};
  }
  return {output, weights};
}

Tensor MultiHeadAttention::sum_of_head_results(const Tensor& z) const {
  const int64_t H = num_heads_, D = head_dim_, C = d_model_;
  // W_O [C, H*D] as one [D, C] block per head: head h's output is z_h W_O[:, hD:(h+1)D]^T.
  const Tensor per_head = transpose(transpose(reshape(out_proj->weight, {C, H, D}), 0, 1), 1, 2);
  const Tensor result =
      hook_point(*this, "hook_result",
                 transpose(matmul(transpose(z, 1, 2), per_head), 1, 2));  // [B, Tq, H, C]
  const Tensor summed = sum(result, {2});                                 // [B, Tq, C]
  return out_proj->bias.defined() ? summed + out_proj->bias : summed;
}

namespace {

// x [B, T, N, C], each of N heads' own input, through that head's D rows of proj ([N*D, C]
// weight): [B, T, N, D].
Tensor project_per_head(const Linear& proj, const Tensor& x) {
  const int64_t N = x.size(2), C = x.size(3), D = proj.weight.size(0) / N;
  const Tensor weights =
      reshape(transpose(reshape(proj.weight, {N, D, C}), 1, 2), {1, N, C, D});    // [1, N, C, D]
  const Tensor projected = transpose(matmul(transpose(x, 1, 2), weights), 1, 2);  // [B, T, N, D]
  return proj.bias.defined() ? projected + reshape(proj.bias, {N, D}) : projected;
}

void check_inputs(const Tensor& query, const Tensor& key_value, int64_t d_model) {
  for (const Tensor* t : {&query, &key_value}) {
    if (t->rank() != 3 || t->size(-1) != d_model) {
      throw ShapeError("MultiHeadAttention: " + std::string(t == &query ? "query " : "key_value ") +
                       to_string(t->shape()) + " is not [B, T, C] with C = d_model " +
                       std::to_string(d_model));
    }
  }
  if (query.size(0) != key_value.size(0)) {
    throw ShapeError("MultiHeadAttention: batch sizes differ: query " + to_string(query.shape()) +
                     ", key_value " + to_string(key_value.shape()));
  }
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

Tensor MultiHeadAttention::forward_incremental(const Tensor& x, KVCache& cache) const {
  check_inputs(x, x, d_model_);
  const int64_t B = x.size(0), Tn = x.size(1), past = cache.length(), T = past + Tn;
  const int64_t H = num_heads_, KV = num_kv_heads_, D = head_dim_;
  if (past > 0 && cache.keys.size(0) != B) {
    throw ShapeError("MultiHeadAttention: x " + to_string(x.shape()) +
                     " does not match the cache's batch of " + std::to_string(cache.keys.size(0)));
  }
  const Tensor q_heads =
      transpose(reshape(q_proj->forward(x), {B, Tn, H, D}), 1, 2);  // [B, H, Tn, D]
  const Tensor k_new =
      transpose(reshape(k_proj->forward(x), {B, Tn, KV, D}), 1, 2);  // [B, KV, Tn, D]
  const Tensor v_new = transpose(reshape(v_proj->forward(x), {B, Tn, KV, D}), 1, 2);
  cache.keys = past > 0 ? concat({cache.keys, k_new}, 2) : k_new;      // [B, KV, T, D]
  cache.values = past > 0 ? concat({cache.values, v_new}, 2) : v_new;  // [B, KV, T, D]

  const Tensor scores = per_head_matmul(q_heads, transpose(cache.keys, -2, -1));  // [B, H, Tn, T]
  // New query i sits at position past + i: it sees the keys up to there.
  Mask later({Tn, T}, std::vector<uint8_t>(Tn * T, 0));
  for (int64_t i = 0; i < Tn; ++i) {
    for (int64_t j = past + i + 1; j < T; ++j) later.values[i * T + j] = 1;
  }
  const Tensor scaled = scores * (1.0 / std::sqrt(static_cast<double>(D)));
  const Tensor modified = score_modifier ? score_modifier->forward(scaled, past) : scaled;
  const Tensor weights =
      softmax(masked_fill(modified, later, -std::numeric_limits<double>::infinity()),
              -1);                                                            // [B, H, Tn, T]
  const Tensor heads = per_head_matmul(weights, cache.values);                // [B, H, Tn, D]
  return out_proj->forward(reshape(transpose(heads, 1, 2), {B, Tn, H * D}));  // [B, Tn, C]
}

AttentionOutput MultiHeadAttention::forward_split(const Tensor& q_input, const Tensor& k_input,
                                                  const Tensor& v_input,
                                                  const AttentionMasks& masks) const {
  // [B, T, heads, C] with the batch of q_input and, for the keys and values, k_input's T.
  const auto fits = [&](const Tensor& input, int64_t heads, const Tensor& same_length) {
    return input.rank() == 4 && same_length.rank() == 4 && input.size(0) == q_input.size(0) &&
           input.size(1) == same_length.size(1) && input.size(2) == heads &&
           input.size(3) == d_model_;
  };
  if (!fits(q_input, num_heads_, q_input) || !fits(k_input, num_kv_heads_, k_input) ||
      !fits(v_input, num_kv_heads_, k_input)) {
    throw ShapeError("MultiHeadAttention: split inputs q " + to_string(q_input.shape()) + ", k " +
                     to_string(k_input.shape()) + ", v " + to_string(v_input.shape()) +
                     " are not [B, Tq, H, C], [B, Tk, KV, C], [B, Tk, KV, C] with H = " +
                     std::to_string(num_heads_) + ", KV = " + std::to_string(num_kv_heads_) +
                     ", C = " + std::to_string(d_model_));
  }
  check_masks(masks, {q_input.size(0), num_heads_, q_input.size(1), k_input.size(1)});
  return attend_projected(project_per_head(*q_proj, q_input), project_per_head(*k_proj, k_input),
                          project_per_head(*v_proj, v_input), masks, nullptr);
}

AttentionOutput MultiHeadAttention::attend(const Tensor& query, const Tensor& key_value,
                                           const AttentionMasks& masks, AttentionTrace* trace,
                                           bool need_weights) const {
  check_inputs(query, key_value, d_model_);
  check_masks(masks, {query.size(0), num_heads_, query.size(1), key_value.size(1)});
  // The fused kernel keeps no intermediates, has no dropout, reads only boolean masks and
  // modifies no scores.
  const bool dropout_active = drop_->p > 0 && drop_->is_training();
  if (trace || dropout_active || masks.additive_mask.defined() || score_modifier ||
      internals_hooked()) {
    return attend_composed(query, key_value, masks, trace);
  }
  return attend_fused(query, key_value, masks, need_weights);
}

AttentionOutput MultiHeadAttention::attend_fused(const Tensor& query, const Tensor& key_value,
                                                 const AttentionMasks& masks,
                                                 bool need_weights) const {
  const int64_t B = query.size(0), Tq = query.size(1), Tk = key_value.size(1);
  const int64_t H = num_heads_, KV = num_kv_heads_, D = head_dim_;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const AttentionMaskSpec spec{
      .causal = masks.causal,
      .key_padding = masks.key_padding_mask ? &*masks.key_padding_mask : nullptr,
      .attn_mask = masks.attn_mask ? &*masks.attn_mask : nullptr};
  // The kernel reads the heads where the projections put them ([B, T, H, D]): no transposes.
  FusedAttention fused;
  if (query.same(key_value)) {
    // Self-attention: one product by the three weights stacked, whose output is the buffer
    // fused_attention_packed reads; its gradient comes back in the same layout, so backward
    // is one product too, with no sum of three gradients for X.
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

int64_t longest_keys_with_weights(int64_t max_keys, bool causal, double dropout) {
  if (dropout > 0) return max_keys;
  return std::min(max_keys, kernels::attention_tiles_min_keys(causal) - 1);
}

bool MultiHeadAttention::internals_hooked() const {
  if (!hooks_running()) return false;
  const std::vector<HookPointRow>& rows = hook_point_table();
  return std::any_of(rows.begin(), rows.end(), [&](const HookPointRow& row) {
    return row.composed_only && hook_wanted(*this, row.suffix);
  });
}

MultiHeadAttention::MultiHeadAttention(const AttentionConfig& config, Generator& gen,
                                       std::shared_ptr<Generator> dropout_gen,
                                       std::shared_ptr<ScoreModifier> modifier)
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
  score_modifier = register_module("score_modifier", std::move(modifier));
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

}  // namespace gradlab::nn
