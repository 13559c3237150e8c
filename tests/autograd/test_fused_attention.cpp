// The fused attention kernels compute exactly what the composed ops compute: outputs, weights
// and every gradient, in float64, for masks, cross-attention and grouped K/V heads. Short key
// sequences go to the kernel with one SIMD lane per head, long ones to the kernel with one GEMM
// per head (autograd/kernels/attention_lanes.h); the cases cover both.
#include <gtest/gtest.h>

#include "autograd/attention.h"
#include "autograd/kernels/attention_lanes.h"
#include "autograd/ops.h"
#include "nn/attention.h"

namespace gradlab::nn {
namespace test_fused_attention {

// Above the lane kernel's limit (checked by KernelChoiceFollowsSequenceLength).
constexpr int64_t kLongKeys = 67;

struct Case {
  const char* name;
  AttentionConfig config;
  int64_t batch, tq, tk;
  bool causal;
  bool padding;
  bool self_input = false;  // key_value is the query tensor itself (the packed projection)
  bool attn_mask = false;   // a boolean [H, Tq, Tk] mask as well, one row fully masked
};

struct Result {
  Tensor output, weights, dx, dkv;
  std::vector<Tensor> grads;
};

// Runs the module on fixed inputs, through the composed ops (with a trace) or the fused kernel.
Result run(const Case& c, bool composed) {
  Generator gen(3);
  MultiHeadAttention attn(c.config, gen);
  attn.to(DType::Float64);
  Generator data(4);
  Tensor x = Tensor::randn({c.batch, c.tq, c.config.d_model}, data, DType::Float64);
  Tensor kv =
      c.self_input ? x : Tensor::randn({c.batch, c.tk, c.config.d_model}, data, DType::Float64);
  x.set_requires_grad();
  kv.set_requires_grad();
  AttentionMasks masks;
  masks.causal = c.causal;
  if (c.padding) {
    std::vector<uint8_t> pad(c.batch * c.tk, 0);
    pad.back() = 1;
    pad[c.tk - 1] = 1;
    masks.key_padding_mask = Mask({c.batch, c.tk}, pad);
  }
  if (c.attn_mask) {
    const int64_t H = c.config.num_heads;
    std::vector<uint8_t> hidden(H * c.tq * c.tk);
    for (size_t i = 0; i < hidden.size(); ++i) hidden[i] = (i * 7 + i / 3) % 5 == 0;
    std::fill_n(hidden.begin() + c.tk, c.tk, 1);  // head 0, query 1 sees nothing
    masks.attn_mask = Mask({H, c.tq, c.tk}, hidden);
  }
  AttentionTrace trace;
  const AttentionOutput out = attn.forward_with_weights(x, kv, masks, composed ? &trace : nullptr);
  const Tensor upstream = Tensor::randn(out.output.shape(), data, DType::Float64);
  sum(out.output * upstream).backward();
  Result r{out.output, out.weights, x.grad(), kv.grad(), {}};
  for (const Tensor& p : attn.parameters()) r.grads.push_back(p.grad());
  return r;
}

class FusedAttentionMatchesComposed : public ::testing::TestWithParam<Case> {};

TEST_P(FusedAttentionMatchesComposed, OutputsWeightsAndGradients) {
  const Result composed = run(GetParam(), true);
  const Result fused = run(GetParam(), false);
  EXPECT_TRUE(allclose(fused.output, composed.output, 1e-12, 1e-12));
  EXPECT_TRUE(allclose(fused.weights, composed.weights, 1e-12, 1e-12));
  EXPECT_TRUE(allclose(fused.dx, composed.dx, 1e-12, 1e-12));
  EXPECT_TRUE(allclose(fused.dkv, composed.dkv, 1e-12, 1e-12));
  ASSERT_EQ(fused.grads.size(), composed.grads.size());
  for (size_t i = 0; i < fused.grads.size(); ++i) {
    EXPECT_TRUE(allclose(fused.grads[i], composed.grads[i], 1e-10, 1e-12)) << "parameter " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, FusedAttentionMatchesComposed,
    ::testing::Values(
        Case{"self", {.d_model = 12, .num_heads = 3}, 2, 5, 5, false, false},
        Case{"causal_padding", {.d_model = 12, .num_heads = 3}, 2, 5, 5, true, true},
        Case{"self_same_input", {.d_model = 12, .num_heads = 3}, 2, 5, 5, true, true, true},
        Case{"gqa_same_input",
             {.d_model = 24, .num_heads = 4, .num_kv_heads = 2},
             3,
             5,
             5,
             true,
             false,
             true},
        Case{"mqa_same_input_no_bias",
             {.d_model = 12, .num_heads = 3, .num_kv_heads = 1, .bias = false},
             2,
             7,
             7,
             false,
             true,
             true},
        Case{"cross", {.d_model = 12, .num_heads = 3}, 2, 5, 7, false, true},
        Case{"gqa", {.d_model = 24, .num_heads = 4, .num_kv_heads = 2}, 3, 5, 5, true, false},
        Case{
            "mqa_cross", {.d_model = 12, .num_heads = 3, .num_kv_heads = 1}, 2, 5, 7, false, false},
        // More heads than a vector has lanes, in groups of 2 sharing a K/V head.
        Case{"many_heads_masked",
             {.d_model = 24, .num_heads = 6, .num_kv_heads = 3},
             3,
             5,
             6,
             true,
             true,
             false,
             true},
        Case{"attn_mask_same_input",
             {.d_model = 12, .num_heads = 3},
             2,
             6,
             6,
             false,
             true,
             true,
             true},
        // Long key sequences: the per-head GEMM kernel.
        Case{"long_cross_masked",
             {.d_model = 12, .num_heads = 3},
             2,
             5,
             kLongKeys,
             false,
             true,
             false,
             true},
        Case{"long_causal_same_input",
             {.d_model = 12, .num_heads = 3, .num_kv_heads = 1},
             1,
             kLongKeys,
             kLongKeys,
             true,
             true,
             true}),
    [](const auto& info) { return std::string(info.param.name); });

// A mask that does not fit [B, H, Tq, Tk] is refused before either path runs, with the same
// message whichever path the call would have taken.
TEST(AttentionMasks, AreCheckedOnceTheSameWayOnBothPaths) {
  Generator gen(10);
  MultiHeadAttention attn({.d_model = 12, .num_heads = 3}, gen);
  const Tensor query = Tensor::randn({2, 5, 12}, gen);
  const Tensor key_value = Tensor::randn({2, 7, 12}, gen);
  AttentionMasks wrong_padding;  // [B, Tq] instead of [B, Tk]
  wrong_padding.key_padding_mask = Mask({2, 5}, std::vector<uint8_t>(10, 0));
  AttentionMasks wrong_attn_mask;  // Tq and Tk swapped
  wrong_attn_mask.attn_mask = Mask({7, 5}, std::vector<uint8_t>(35, 0));
  AttentionMasks growing_additive;  // would broadcast the scores up to rank 5
  growing_additive.additive_mask = Tensor::zeros({4, 1, 1, 5, 7});
  const std::pair<const AttentionMasks*, std::string> cases[] = {
      {&wrong_padding, "key_padding_mask [2,5] does not match [B, Tk] = [2,7]"},
      {&wrong_attn_mask, "attn_mask [7,5] does not broadcast to [B, H, Tq, Tk] = [2,3,5,7]"},
      {&growing_additive,
       "additive_mask [4,1,1,5,7] does not broadcast to [B, H, Tq, Tk] = [2,3,5,7]"}};
  for (const auto& [masks, message] : cases) {
    for (const bool composed : {false, true}) {
      AttentionTrace trace;
      try {
        attn.forward_with_weights(query, key_value, *masks, composed ? &trace : nullptr);
        ADD_FAILURE() << "expected ShapeError: " << message;
      } catch (const ShapeError& e) {
        EXPECT_EQ(std::string(e.what()), "MultiHeadAttention: " + message);
      }
    }
  }
}

// The cases above reach both kernels: short sequences the lane kernel, kLongKeys the GEMM one.
TEST(FusedAttention, KernelChoiceFollowsSequenceLength) {
  const kernels::AttentionDims short_keys{2, 5, 7, 3, 3, 4}, long_keys{2, 5, kLongKeys, 3, 3, 4};
  EXPECT_TRUE(kernels::attention_lanes_fit<double>(short_keys));
  EXPECT_TRUE(kernels::attention_lanes_fit<float>(short_keys));
  EXPECT_FALSE(kernels::attention_lanes_fit<double>(long_keys));
  EXPECT_FALSE(kernels::attention_lanes_fit<float>(long_keys));
}

// Without need_weights no weights come back, and nothing else changes: the lane kernel's
// backward reads its own copy of them.
TEST(FusedAttention, WeightsCanBeLeftOut) {
  for (const int64_t tk : {int64_t{7}, kLongKeys}) {
    Generator gen(9);
    Tensor q = Tensor::randn({2, 5, 4, 3}, gen, DType::Float64);
    Tensor k = Tensor::randn({2, tk, 2, 3}, gen, DType::Float64);
    Tensor v = Tensor::randn({2, tk, 2, 3}, gen, DType::Float64);
    const Tensor upstream = Tensor::randn({2, 5, 4, 3}, gen, DType::Float64);
    std::vector<Tensor> grads[2];
    Tensor outputs[2];
    for (const bool need_weights : {true, false}) {
      for (Tensor* t : {&q, &k, &v}) *t = t->detach().set_requires_grad();
      const FusedAttention out = fused_attention(q, k, v, {.causal = true}, 0.5, need_weights);
      EXPECT_EQ(out.weights.defined(), need_weights) << "tk " << tk;
      sum(out.output * upstream).backward();
      outputs[need_weights] = out.output;
      grads[need_weights] = {q.grad(), k.grad(), v.grad()};
    }
    EXPECT_TRUE(allclose(outputs[0], outputs[1], 0, 0)) << "tk " << tk;
    for (int i = 0; i < 3; ++i)
      EXPECT_TRUE(allclose(grads[0][i], grads[1][i], 0, 0)) << "tk " << tk << ", input " << i;
  }
}

TEST(FusedAttention, FullyMaskedRowGivesZeroOutputAndGradient) {
  Generator gen(5);
  Tensor q = Tensor::randn({1, 3, 2, 4}, gen, DType::Float64).set_requires_grad();
  Tensor k = Tensor::randn({1, 5, 2, 4}, gen, DType::Float64).set_requires_grad();
  Tensor v = Tensor::randn({1, 5, 2, 4}, gen, DType::Float64).set_requires_grad();
  const Mask everything({1, 5}, {1, 1, 1, 1, 1});
  const FusedAttention out = fused_attention(q, k, v, {.key_padding = &everything}, 0.5);
  EXPECT_TRUE(allclose(out.output, Tensor::zeros({1, 3, 2, 4}, DType::Float64), 0, 0));
  sum(out.output).backward();
  EXPECT_TRUE(allclose(q.grad(), Tensor::zeros(q.shape(), DType::Float64), 0, 0));
  EXPECT_TRUE(allclose(v.grad(), Tensor::zeros(v.shape(), DType::Float64), 0, 0));
}

// The packed kernel computes what the separate one computes on the three slices of its buffer,
// with the gradient of each slice in its place.
TEST(FusedAttention, PackedMatchesSeparateOperands) {
  const int64_t B = 2, T = 5, H = 4, KV = 2, D = 3;
  Generator gen(7);
  Tensor qkv = Tensor::randn({B, T, H + 2 * KV, D}, gen, DType::Float64).set_requires_grad();
  Tensor q = narrow(qkv, 2, 0, H).detach().set_requires_grad();
  Tensor k = narrow(qkv, 2, H, KV).detach().set_requires_grad();
  Tensor v = narrow(qkv, 2, H + KV, KV).detach().set_requires_grad();
  const Mask padding({B, T}, {0, 0, 0, 0, 1, 0, 0, 0, 1, 1});
  const AttentionMaskSpec spec{.causal = true, .key_padding = &padding};
  const Tensor upstream = Tensor::randn({B, T, H, D}, gen, DType::Float64);

  const FusedAttention packed = fused_attention_packed(qkv, H, KV, spec, 0.7);
  const FusedAttention separate = fused_attention(q, k, v, spec, 0.7);
  EXPECT_TRUE(allclose(packed.output, separate.output, 0, 0));
  EXPECT_TRUE(allclose(packed.weights, separate.weights, 0, 0));
  sum(packed.output * upstream).backward();
  sum(separate.output * upstream).backward();
  EXPECT_TRUE(allclose(qkv.grad(), concat({q.grad(), k.grad(), v.grad()}, 2), 0, 0));
}

TEST(FusedAttention, PackedRejectsAHeadCountThatDoesNotMatch) {
  Generator gen(8);
  const Tensor qkv = Tensor::randn({2, 5, 7, 3}, gen);
  try {
    fused_attention_packed(qkv, 4, 2, {}, 0.5);  // needs 4 + 2 * 2 = 8 heads
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("fused_attention_packed"), std::string::npos) << what;
    EXPECT_NE(what.find("[2,5,7,3]"), std::string::npos) << what;
  }
  // No query heads: 0 + 2 * 2 heads match the buffer, but there is nothing to attend with.
  EXPECT_THROW(fused_attention_packed(Tensor::randn({2, 5, 4, 3}, gen), 0, 2, {}, 0.5), ShapeError);
}

TEST(FusedAttention, RejectsHeadsThatDoNotGroup) {
  Generator gen(6);
  const Tensor q = Tensor::randn({1, 3, 3, 4}, gen);
  const Tensor kv = Tensor::randn({1, 5, 2, 4}, gen);
  try {
    fused_attention(q, kv, kv, {}, 0.5);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("[1,3,3,4]"), std::string::npos) << e.what();
  }
}

}  // namespace test_fused_attention
}  // namespace gradlab::nn
