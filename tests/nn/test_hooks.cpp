// Hook points, activation caches and hooks (nn/hooks.h): the points a forward pass meets, the
// cache against the composed forward, patching and ablation identities, the cached gradients
// against central differences, grouped K/V heads, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "autograd/ops.h"
#include "nn/hooks.h"
#include "nn/models.h"
#include "tests/test_helpers.h"

namespace gradlab::nn {
namespace test_hooks {

using testing::contains;

ModelConfig small_config(int64_t num_heads = 3, int64_t num_kv_heads = 0) {
  return {.vocab_size = 7,
          .max_len = 9,
          .d_model = 12,
          .num_layers = 2,
          .seed = 3,
          .attention = {.num_heads = num_heads, .num_kv_heads = num_kv_heads},
          .feed_forward = {.d_ff = 20}};
}

std::shared_ptr<SequenceModel> small_model(const std::string& kind, DType dtype,
                                           const ModelConfig& config = small_config()) {
  std::shared_ptr<SequenceModel> model = make_sequence_model(kind, config);
  model->to(dtype);
  model->eval();
  return model;
}

// Two samples [B = 2, P + 1 + A = 6] with prompts of 2 tokens: the decoder reads T = 5.
SequenceBatch batch_of(const SequenceModel& model, std::vector<int64_t> values) {
  return model.make_batch(Indices({2, 6}, std::move(values)), 2);
}
SequenceBatch clean_batch(const SequenceModel& model) {
  return batch_of(model, {1, 2, 0, 1, 2, 3, 4, 5, 0, 4, 5, 6});
}
SequenceBatch corrupt_batch(const SequenceModel& model) {
  return batch_of(model, {3, 2, 0, 1, 2, 3, 6, 5, 0, 4, 5, 6});
}

std::vector<std::string> names_of(const std::vector<HookPointInfo>& points) {
  std::vector<std::string> names;
  for (const HookPointInfo& point : points) names.push_back(point.name);
  return names;
}

bool same_values(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.to_vector() == b.to_vector();
}

TEST(HookPoints, DecoderListsEveryPointInForwardOrder) {
  const auto model = small_model("decoder", DType::Float32);
  const std::vector<HookPointInfo> points = hook_points(*model, clean_batch(*model));
  std::vector<std::string> want{"embed.hook_token", "embed.hook_position"};
  for (const std::string block : {"blocks.0.", "blocks.1."}) {
    for (const char* point :
         {"hook_resid_pre",      "hook_attn_in",        "hook_q_input",      "hook_k_input",
          "hook_v_input",        "ln1.hook_normalized", "attn.hook_q",       "attn.hook_k",
          "attn.hook_v",         "attn.hook_scores",    "attn.hook_pattern", "attn.hook_z",
          "attn.hook_result",    "hook_attn_out",       "hook_resid_mid",    "hook_mlp_in",
          "ln2.hook_normalized", "ffn.hook_pre",        "ffn.hook_post",     "hook_mlp_out",
          "hook_resid_post"}) {
      want.push_back(block + point);
    }
  }
  want.push_back("ln_f.hook_normalized");
  want.push_back("hook_logits");
  EXPECT_EQ(names_of(points), want);
  for (const HookPointInfo& point : points) EXPECT_FALSE(point.letters.empty()) << point.name;
  // B = 1, T = 5, H = 3, D = 4, C = 12, F = 20, V = 7.
  EXPECT_EQ(points[3].shape, (Shape{1, 5, 3, 12}));   // hook_attn_in [B, T, H, C]
  EXPECT_EQ(points[8].shape, (Shape{1, 5, 3, 4}));    // hook_q [B, Tq, H, D]
  EXPECT_EQ(points[11].shape, (Shape{1, 3, 5, 5}));   // hook_scores [B, H, Tq, Tk]
  EXPECT_EQ(points[14].shape, (Shape{1, 5, 3, 12}));  // hook_result [B, Tq, H, C]
  EXPECT_EQ(points[19].shape, (Shape{1, 5, 20}));     // hook_pre [B, T, F]
  EXPECT_EQ(points.back().shape, (Shape{1, 5, 7}));   // hook_logits [B, T, V]
  EXPECT_FALSE(hooks_running());
}

TEST(HookPoints, GroupedHeadsListKeysAndValuesPerKvHead) {
  const auto model = small_model("decoder", DType::Float32, small_config(4, 2));
  for (const HookPointInfo& point : hook_points(*model, clean_batch(*model))) {
    if (point.name == "blocks.0.attn.hook_k" || point.name == "blocks.0.attn.hook_v") {
      EXPECT_EQ(point.shape, (Shape{1, 5, 2, 3})) << point.name;  // [B, Tk, KV, D]
      EXPECT_EQ(point.letters, "[B, Tk, KV, D]");
    }
    if (point.name == "blocks.0.attn.hook_z") {
      EXPECT_EQ(point.shape, (Shape{1, 5, 4, 3}));
    }
  }
}

TEST(HookPoints, EncoderDecoderNamesItsStacksAndCrossAttention) {
  const auto model = small_model("seq2seq", DType::Float32);
  const SequenceBatch batch = clean_batch(*model);  // S = 2, T = 3
  const std::vector<HookPointInfo> points = hook_points(*model, batch);
  const std::vector<std::string> names = names_of(points);
  for (const char* name :
       {"embed.hook_source_token", "embed.hook_source_position", "encoder.1.attn.hook_pattern",
        "encoder_ln.hook_normalized", "embed.hook_token", "decoder.0.cross_attn.hook_k",
        "decoder.0.hook_cross_attn_out", "decoder.1.hook_resid_mid_cross", "hook_logits"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
  for (const HookPointInfo& point : points) {
    EXPECT_FALSE(point.letters.empty()) << point.name << " has no row in the letters table";
    if (point.name == "decoder.0.cross_attn.hook_pattern") {
      EXPECT_EQ(point.shape, (Shape{1, 3, 3, 2}));  // [B, H, Tq = T, Tk = S]
    }
  }
}

// Every cached point of block 0 against the block's own modules run step by step (the composed
// attention with its trace), in both dtypes: equal bit for bit.
void expect_cache_matches_composed_forward(DType dtype) {
  const auto model = small_model("decoder", dtype);
  const auto& decoder = dynamic_cast<const DecoderLM&>(*model);
  const SequenceBatch batch = clean_batch(*model);
  const ActivationCache cache = run_with_cache(*model, batch, "*");

  const TransformerBlock& block = *decoder.blocks[0];
  const Tensor x = cache.at("blocks.0.hook_resid_pre");
  EXPECT_TRUE(same_values(x, cache.at("embed.hook_token") + cache.at("embed.hook_position")));
  const Tensor normalized = block.ln1->forward(x);
  EXPECT_TRUE(same_values(cache.at("blocks.0.ln1.hook_normalized"), normalized));
  AttentionMasks causal;
  causal.causal = true;
  AttentionTrace trace;
  block.attn->forward_with_weights(normalized, normalized, causal, &trace);
  const int64_t B = 2, T = 5, H = 3, D = 4;
  EXPECT_TRUE(same_values(cache.at("blocks.0.attn.hook_q"), reshape(trace.q, {B, T, H, D})));
  EXPECT_TRUE(same_values(cache.at("blocks.0.attn.hook_k"), reshape(trace.k, {B, T, H, D})));
  EXPECT_TRUE(same_values(cache.at("blocks.0.attn.hook_v"), reshape(trace.v, {B, T, H, D})));
  EXPECT_TRUE(same_values(cache.at("blocks.0.attn.hook_pattern"), trace.weights));
  EXPECT_TRUE(same_values(cache.at("blocks.0.attn.hook_z"), transpose(trace.head_outputs, 1, 2)));
  // Scores: the trace's scaled scores where a key is visible, -inf after the query.
  const Tensor scores = cache.at("blocks.0.attn.hook_scores");
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t i = 0; i < T; ++i) {
      for (int64_t j = 0; j < T; ++j) {
        const double want = j <= i ? trace.scaled_scores.at({1, h, i, j}) : -INFINITY;
        EXPECT_EQ(scores.at({1, h, i, j}), want) << h << " " << i << " " << j;
      }
    }
  }
  // Each head's result through W_O sums, with W_O's bias, to the sublayer's output.
  const Tensor summed =
      sum(cache.at("blocks.0.attn.hook_result"), {2}) + block.attn->out_proj->bias;
  EXPECT_TRUE(same_values(cache.at("blocks.0.hook_attn_out"), summed));
  EXPECT_TRUE(allclose(summed, trace.output, 1e-5, 1e-6));
  const Tensor mid = cache.at("blocks.0.hook_resid_mid");
  EXPECT_TRUE(same_values(mid, x + summed));
  const auto& ffn = dynamic_cast<const FeedForward&>(*block.ffn);
  const Tensor pre = ffn.fc1->forward(block.ln2->forward(mid));
  EXPECT_TRUE(same_values(cache.at("blocks.0.ffn.hook_pre"), pre));
  EXPECT_TRUE(same_values(cache.at("blocks.0.ffn.hook_post"), gelu(pre)));
  const Tensor mlp_out = ffn.fc2->forward(gelu(pre));
  EXPECT_TRUE(same_values(cache.at("blocks.0.hook_mlp_out"), mlp_out));
  EXPECT_TRUE(same_values(cache.at("blocks.0.hook_resid_post"), mid + mlp_out));
  EXPECT_TRUE(same_values(cache.at("blocks.1.hook_resid_pre"), mid + mlp_out));
  EXPECT_TRUE(same_values(cache.at("hook_logits"), cache.logits));
  EXPECT_TRUE(same_values(decoder.head->forward(cache.at("ln_f.hook_normalized")), cache.logits));
  // And the whole cached run against the plain (fused) forward.
  const double tol = dtype == DType::Float64 ? 1e-12 : 1e-5;
  EXPECT_TRUE(allclose(cache.logits, model->forward(batch), tol, tol));
}

TEST(ActivationCacheTest, EqualsTheComposedForwardInFloat32) {
  expect_cache_matches_composed_forward(DType::Float32);
}

TEST(ActivationCacheTest, EqualsTheComposedForwardInFloat64) {
  expect_cache_matches_composed_forward(DType::Float64);
}

TEST(ActivationCacheTest, StoresOnlyWhatItsFilterNames) {
  const auto model = small_model("decoder", DType::Float32);
  const ActivationCache cache =
      run_with_cache(*model, clean_batch(*model), "blocks.*.attn.hook_pattern");
  EXPECT_EQ(cache.names(),
            (std::vector<std::string>{"blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"}));
  EXPECT_EQ(cache.bytes(), 2 * (2 * 3 * 5 * 5) * 4);
  EXPECT_THROW(
      {
        try {
          cache.at("blocks.0.attn.hook_patern");
        } catch (const ConfigError& e) {
          EXPECT_TRUE(contains(e.what(), "closest: blocks.0.attn.hook_pattern")) << e.what();
          throw;
        }
      },
      ConfigError);
}

TEST(ActivationCacheTest, StopsAfterTheLastPointWhenNothingLaterIsNeeded) {
  const auto model = small_model("decoder", DType::Float32);
  int later_points_reached = 0;
  CacheOptions options{.logits = false,
                       .hooks = {{"blocks.1.*", [&](const Tensor&, const std::string&) {
                                    ++later_points_reached;
                                    return Tensor();
                                  }}}};
  const ActivationCache cache =
      run_with_cache(*model, clean_batch(*model), "blocks.0.hook_resid_post", options);
  EXPECT_EQ(cache.names(), std::vector<std::string>{"blocks.0.hook_resid_post"});
  EXPECT_FALSE(cache.logits.defined());
  EXPECT_EQ(later_points_reached, 0);
  options.logits = true;
  const ActivationCache whole =
      run_with_cache(*model, clean_batch(*model), "blocks.0.hook_resid_post", options);
  EXPECT_TRUE(whole.logits.defined());
  EXPECT_GT(later_points_reached, 0);
}

TEST(RunWithHooks, ComposedAndFusedAttentionAgree) {
  for (const DType dtype : {DType::Float32, DType::Float64}) {
    const auto model = small_model("decoder", dtype, small_config(4, 2));
    const SequenceBatch batch = clean_batch(*model);
    const Tensor fused = model->forward(batch);
    const Tensor composed = run_with_hooks(
        *model, batch,
        {{"blocks.*.attn.hook_z", [](const Tensor&, const std::string&) { return Tensor(); }}});
    const double tol = dtype == DType::Float64 ? 1e-12 : 1e-5;
    EXPECT_TRUE(allclose(composed, fused, tol, tol)) << dtype_name(dtype);
    EXPECT_FALSE(same_values(composed, Tensor::zeros(composed.shape(), dtype)));
  }
}

TEST(RunWithHooks, PatchingEveryPointOfALayerGivesTheCleanLogits) {
  const auto model = small_model("decoder", DType::Float32);
  const ActivationCache clean = run_with_cache(*model, clean_batch(*model), "blocks.0.*");
  const ActivationCache corrupt = run_with_cache(*model, corrupt_batch(*model), "blocks.0.*");
  ASSERT_FALSE(same_values(clean.logits, corrupt.logits));
  const Tensor patched = run_with_hooks(
      *model, corrupt_batch(*model),
      {{"blocks.0.*", [&](const Tensor&, const std::string& name) { return clean.at(name); }}});
  EXPECT_TRUE(same_values(patched, clean.logits));
  const Tensor untouched =
      run_with_hooks(*model, corrupt_batch(*model),
                     {{"blocks.0.*", [](const Tensor&, const std::string&) { return Tensor(); }}});
  EXPECT_TRUE(same_values(untouched, corrupt.logits));
}

TEST(RunWithHooks, ZeroingEveryHeadLeavesOnlyTheOutputBias) {
  const auto model = small_model("decoder", DType::Float64);
  const auto& decoder = dynamic_cast<const DecoderLM&>(*model);
  const Tensor bias = decoder.blocks[1]->attn->out_proj->bias;  // [C]
  const SequenceBatch batch = clean_batch(*model);
  const HookFunction zero = [](const Tensor& z, const std::string&) { return z * 0.0; };
  const ActivationCache ablated = run_with_cache(*model, batch, "blocks.1.hook_attn_out",
                                                 {.hooks = {{"blocks.1.attn.hook_z", zero}}});
  const Tensor only_bias = Tensor::zeros({2, 5, 12}, DType::Float64) + bias;
  EXPECT_TRUE(same_values(ablated.at("blocks.1.hook_attn_out"), only_bias));
  const Tensor removed = run_with_hooks(
      *model, batch,
      {{"blocks.1.hook_attn_out", [&](const Tensor&, const std::string&) { return only_bias; }}});
  EXPECT_TRUE(same_values(ablated.logits, removed));
}

TEST(RunWithHooks, PatchedRunsBackpropagate) {
  const auto model = small_model("decoder", DType::Float64);
  const SequenceBatch batch = clean_batch(*model);
  const Tensor logits = run_with_hooks(
      *model, batch,
      {{"blocks.0.attn.hook_v", [](const Tensor& v, const std::string&) { return v * 2.0; }}});
  sequence_loss(logits, batch).backward();
  const Tensor grad = model->parameter("blocks.0.attn.v_proj.weight").grad();
  ASSERT_TRUE(grad.defined());
  EXPECT_GT(sum(grad * grad).item(), 0.0);
}

// d loss / d activation from the cache against central differences of the loss with the
// activation shifted by a hook, element by element (float64).
TEST(ActivationCacheTest, GradientsMatchCentralDifferences) {
  // hook_result also checks the backward of the per-head W_O path it switches on.
  for (const char* point :
       {"blocks.1.hook_resid_mid", "blocks.0.attn.hook_pattern", "blocks.1.attn.hook_result",
        "blocks.1.ffn.hook_post", "embed.hook_position"}) {
    const auto model = small_model("decoder", DType::Float64, small_config(4, 2));
    const SequenceBatch batch = clean_batch(*model);
    const ActivationCache cache = run_with_cache(*model, batch, point, {.gradients = true});
    const Tensor grad = cache.at(std::string(point) + "_grad");
    ASSERT_EQ(grad.shape(), cache.at(point).shape()) << point;
    const std::vector<double> analytic = grad.to_vector();
    constexpr double eps = 1e-6;
    auto loss_shifted = [&](int64_t index, double by) {
      std::vector<double> shift(analytic.size(), 0.0);
      shift[static_cast<size_t>(index)] = by;
      const Tensor delta = Tensor::from_vector(shift, grad.shape(), DType::Float64);
      return sequence_loss(
                 run_with_hooks(
                     *model, batch,
                     {{point, [&](const Tensor& a, const std::string&) { return a + delta; }}}),
                 batch)
          .item();
    };
    double largest = 0;
    for (size_t i = 0; i < analytic.size(); ++i) {
      const double numeric = (loss_shifted(static_cast<int64_t>(i), eps) -
                              loss_shifted(static_cast<int64_t>(i), -eps)) /
                             (2 * eps);
      EXPECT_NEAR(analytic[i], numeric, 1e-7 + 1e-5 * std::abs(numeric)) << point << " at " << i;
      largest = std::max(largest, std::abs(numeric));
    }
    EXPECT_GT(largest, 1e-4) << point << ": a gradient of zeros would pass";
  }
}

TEST(RunWithHooks, AblatingOneQueryHeadOfAGroupLeavesTheOthers) {
  const auto model = small_model("decoder", DType::Float32, small_config(4, 2));
  const SequenceBatch batch = clean_batch(*model);
  const ActivationCache intact = run_with_cache(*model, batch, "blocks.0.attn.*");
  const ActivationCache ablated = run_with_cache(
      *model, batch, "blocks.0.attn.*",
      {.hooks = {{"blocks.0.attn.hook_q",
                  [](const Tensor& q, const std::string&) { return zero_head(q, 2, 1); }}}});
  // Heads 0 and 1 read K/V head 0; zeroing query head 1 makes its pattern uniform over the
  // visible keys and changes no other head.
  for (const char* point : {"blocks.0.attn.hook_pattern", "blocks.0.attn.hook_z"}) {
    const bool heads_first = contains(point, "pattern");  // [B, H, ..] or [B, T, H, ..]
    const Tensor a = intact.at(point), b = ablated.at(point);
    const std::vector<double> va = a.to_vector(), vb = b.to_vector();
    const int64_t H = 4, inner = heads_first ? 25 : 3;
    for (size_t i = 0; i < va.size(); ++i) {
      const int64_t head = (static_cast<int64_t>(i) / inner) % H;
      if (head != 1) {
        EXPECT_EQ(va[i], vb[i]) << point << " at " << i;
      }
    }
    EXPECT_FALSE(same_values(a, b)) << point;
  }
  EXPECT_FLOAT_EQ(ablated.at("blocks.0.attn.hook_pattern").at({0, 1, 3, 0}), 0.25f);
}

TEST(HookErrors, AFilterThatMatchesNothingNamesTheClosestPoints) {
  const auto model = small_model("decoder", DType::Float32);
  try {
    run_with_cache(*model, clean_batch(*model), "blocks.0.attn.hook_patern");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "'blocks.0.attn.hook_patern' matches no hook point"))
        << e.what();
    EXPECT_TRUE(contains(e.what(), "closest: blocks.0.attn.hook_pattern")) << e.what();
  }
  const HookFilter nothing([](const std::string&) { return false; }, "no point at all");
  EXPECT_THROW(run_with_hooks(*model, clean_batch(*model), {{nothing, nullptr}}), ConfigError);
}

TEST(HookErrors, AReplacementOfAnotherShapeNamesThePointAndBothShapes) {
  const auto model = small_model("decoder", DType::Float32);
  try {
    run_with_hooks(*model, clean_batch(*model),
                   {{"blocks.1.hook_resid_mid", [](const Tensor&, const std::string&) {
                       return Tensor::zeros({2, 5, 11});
                     }}});
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(contains(e.what(), "hook on blocks.1.hook_resid_mid: replacement [2,5,11]"))
        << e.what();
    EXPECT_TRUE(contains(e.what(), "activation's [2,5,12]")) << e.what();
  }
  EXPECT_THROW(zero_head(Tensor::zeros({2, 5, 3, 4}), 2, 3), ShapeError);
  EXPECT_FALSE(hooks_running());
}

TEST(HookFilterTest, GlobsAndPredicates) {
  EXPECT_TRUE(HookFilter("blocks.*.attn.hook_pattern").matches("blocks.12.attn.hook_pattern"));
  EXPECT_FALSE(HookFilter("blocks.*.attn.hook_pattern").matches("blocks.1.cross_attn.hook_z"));
  EXPECT_TRUE(HookFilter("*hook_z").matches("decoder.0.cross_attn.hook_z"));
  EXPECT_TRUE(HookFilter("blocks.?.hook_resid_pre").matches("blocks.3.hook_resid_pre"));
  EXPECT_FALSE(HookFilter("blocks.?.hook_resid_pre").matches("blocks.10.hook_resid_pre"));
  EXPECT_TRUE(HookFilter::all().matches("hook_logits"));
  const HookFilter layer_one([](const std::string& n) { return n.rfind("blocks.1.", 0) == 0; },
                             "layer 1");
  EXPECT_TRUE(layer_one.matches("blocks.1.hook_resid_pre"));
  EXPECT_FALSE(layer_one.is_pattern());
}

}  // namespace test_hooks
}  // namespace gradlab::nn
