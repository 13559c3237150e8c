// The tiled attention kernel (autograd/kernels/attention_tiles.h) computes what the per-head
// kernel computes (itself tested equal to the composed ops in test_fused_attention.cpp): the
// output and the gradients of Q, K and V, in float64, with tiles of 3 queries by 4 keys so that
// small problems cross many tiles, for every mask, fully masked rows, cross-attention and
// grouped K/V heads. And the op takes it for long key sequences when the weights are not asked
// for (gradient-checked there in op_checks.cpp), with memory that grows linearly in the
// sequence length.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <vector>

#include "autograd/attention.h"
#include "autograd/kernels/attention.h"
#include "autograd/kernels/attention_tiles.h"
#include "autograd/ops.h"
#include "autograd/storage.h"
#include "nn/attention.h"

namespace gradlab {
namespace test_attention_tiles {

using kernels::AttentionDims;

struct TileCase {
  const char* name;
  AttentionDims d;
  bool causal = false;
  bool padding = false;    // key padding, all of batch entry 1's keys from the third on
  bool attn_mask = false;  // a [H, Tq, Tk] mask, query 1 of head 0 seeing nothing
};

void PrintTo(const TileCase& c, std::ostream* out) {
  *out << c.name;
}

std::vector<double> random_values(int64_t n, Generator& gen) {
  std::vector<double> values(n);
  for (double& v : values) v = gen.normal();
  return values;
}

double max_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

class TiledAttention : public ::testing::TestWithParam<TileCase> {};

TEST_P(TiledAttention, EqualsThePerHeadKernel) {
  const TileCase& c = GetParam();
  const AttentionDims& d = c.d;
  Generator gen(5);
  std::vector<double> q = random_values(d.B * d.Tq * d.H * d.D, gen);
  std::vector<double> k = random_values(d.B * d.Tk * d.KV * d.D, gen);
  std::vector<double> v = random_values(d.B * d.Tk * d.KV * d.D, gen);
  const std::vector<double> g = random_values(d.B * d.Tq * d.H * d.D, gen);
  std::vector<uint8_t> padding(d.B * d.Tk, 0);
  if (c.padding) std::fill(padding.begin() + d.Tk + 2, padding.begin() + 2 * d.Tk, 1);
  std::vector<uint8_t> hidden(d.H * d.Tq * d.Tk);
  for (size_t i = 0; i < hidden.size(); ++i) hidden[i] = (i * 7 + i / 3) % 5 == 0;
  std::fill_n(hidden.begin() + d.Tk, d.Tk, 1);  // head 0, query 1
  const kernels::AttentionMask mask(d, c.causal, c.padding ? padding.data() : nullptr,
                                    c.attn_mask ? hidden.data() : nullptr, Shape{d.H, d.Tq, d.Tk});
  const double scale = 0.7;
  const auto in = kernels::separate_operands<const double>(q.data(), k.data(), v.data(), d);

  std::vector<double> want_out(g.size()), weights(d.B * d.H * d.Tq * d.Tk);
  kernels::attention_forward<double>(in, d, mask, scale, want_out.data(), weights.data());
  std::vector<double> want_dq(q.size()), want_dk(k.size()), want_dv(v.size());
  kernels::attention_backward<double>(
      g.data(), in, weights.data(), d, c.causal, scale,
      kernels::separate_operands<double>(want_dq.data(), want_dk.data(), want_dv.data(), d));

  const kernels::AttentionTiles tiles{.query_rows = 3, .keys = 4};
  std::vector<double> out(g.size()), lse(d.B * d.H * d.Tq);
  kernels::attention_tiles_forward<double>(in, d, mask, scale, out.data(), lse.data(), tiles);
  std::vector<double> dq(q.size(), 9.0), dk(k.size(), 9.0), dv(v.size(), 9.0);  // overwritten
  kernels::attention_tiles_backward<double>(
      g.data(), in, out.data(), lse.data(), d, mask, scale,
      kernels::separate_operands<double>(dq.data(), dk.data(), dv.data(), d), tiles);

  EXPECT_LT(max_difference(out, want_out), 1e-12);
  EXPECT_LT(max_difference(dq, want_dq), 1e-12);
  EXPECT_LT(max_difference(dk, want_dk), 1e-12);
  EXPECT_LT(max_difference(dv, want_dv), 1e-12);
  // lse is the log of each row's softmax denominator: -inf exactly where a row sees nothing.
  for (int64_t b = 0; b < d.B; ++b) {
    for (int64_t h = 0; h < d.H; ++h) {
      for (int64_t i = 0; i < d.Tq; ++i) {
        bool sees = false;
        for (int64_t j = 0; j < d.Tk; ++j)
          sees = sees || weights[((b * d.H + h) * d.Tq + i) * d.Tk + j] > 0;
        EXPECT_EQ(std::isinf(lse[(b * d.H + h) * d.Tq + i]), !sees) << b << " " << h << " " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TiledAttention,
    ::testing::Values(TileCase{"self", {2, 7, 7, 3, 3, 5}},
                      TileCase{"causal", {2, 10, 10, 3, 3, 5}, true},
                      TileCase{"causal_padding", {2, 9, 9, 2, 2, 3}, true, true},
                      // Batch entry 1's first two keys only, and rows hidden by attn_mask.
                      TileCase{"padding_attn_mask", {2, 5, 9, 2, 2, 4}, false, true, true},
                      TileCase{"cross", {2, 5, 11, 3, 3, 4}},
                      TileCase{"causal_more_queries_than_keys", {1, 11, 6, 2, 2, 3}, true},
                      TileCase{"grouped_heads", {3, 6, 8, 4, 2, 5}, true, false, true},
                      TileCase{"one_kv_head", {2, 7, 13, 3, 1, 6}, false, true}),
    [](const ::testing::TestParamInfo<TileCase>& info) { return info.param.name; });

// The op's choice: the tiled kernel without weights from 256 keys under the causal rule and
// from 1024 without it; the per-head kernel below those and whenever the weights are wanted.
TEST(TiledAttention, TheOpTakesItForLongKeysWithoutWeights) {
  const AttentionDims causal_256{1, 256, 256, 2, 2, 8}, plain_1023{1, 5, 1023, 2, 2, 8};
  EXPECT_TRUE(kernels::attention_tiles_fit(causal_256, true));
  EXPECT_FALSE(kernels::attention_tiles_fit({1, 255, 255, 2, 2, 8}, true));
  EXPECT_FALSE(kernels::attention_tiles_fit(causal_256, false));
  EXPECT_FALSE(kernels::attention_tiles_fit(plain_1023, false));
  EXPECT_TRUE(kernels::attention_tiles_fit({1, 5, 1024, 2, 2, 8}, false));
}

// fused_attention on the weights-free path (the tiled kernel) against the same call with
// weights (the per-head kernel): output and gradients, with and without the causal rule.
TEST(TiledAttention, TheOpsTwoPathsAgree) {
  for (const bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "not causal");
    const int64_t B = 2, Tq = causal ? 300 : 5, Tk = causal ? 300 : 1033, H = 2, KV = 1, D = 3;
    std::vector<uint8_t> pad(B * Tk, 0);
    pad[Tk - 1] = pad[Tk + 130] = 1;
    const Mask padding({B, Tk}, pad);
    const AttentionMaskSpec mask{.causal = causal, .key_padding = &padding};
    ASSERT_TRUE(kernels::attention_tiles_fit({B, Tq, Tk, H, KV, D}, causal));
    auto run = [&](bool need_weights) {
      Generator data(8);
      Tensor q = Tensor::randn({B, Tq, H, D}, data, DType::Float64).set_requires_grad();
      Tensor k = Tensor::randn({B, Tk, KV, D}, data, DType::Float64).set_requires_grad();
      Tensor v = Tensor::randn({B, Tk, KV, D}, data, DType::Float64).set_requires_grad();
      const FusedAttention result = fused_attention(q, k, v, mask, 0.5, need_weights);
      EXPECT_EQ(result.weights.defined(), need_weights);
      sum(result.output * Tensor::randn(result.output.shape(), data, DType::Float64)).backward();
      return std::vector<Tensor>{result.output, q.grad(), k.grad(), v.grad()};
    };
    const std::vector<Tensor> tiled = run(false), per_head = run(true);
    for (size_t i = 0; i < tiled.size(); ++i) {
      EXPECT_TRUE(allclose(tiled[i], per_head[i], 1e-12, 1e-12)) << "tensor " << i;
    }
  }
}

// A module's causal self-attention over 300 positions, whose forward without weights runs the
// tiled kernel, against the same module's composed ops (the tutorial's step-by-step path, with a
// trace): output and every gradient, with key padding that hides a whole sequence's last keys.
TEST(TiledAttention, TheModuleMatchesItsComposedOps) {
  const int64_t B = 2, T = 300, C = 12;
  Generator gen(3);
  nn::MultiHeadAttention attn({.d_model = C, .num_heads = 3, .num_kv_heads = 1}, gen);
  attn.to(DType::Float64);
  nn::AttentionMasks masks;
  masks.causal = true;
  std::vector<uint8_t> pad(B * T, 0);
  std::fill(pad.begin() + T + 200, pad.end(), 1);
  masks.key_padding_mask = Mask({B, T}, pad);
  ASSERT_TRUE(kernels::attention_tiles_fit({B, T, T, 3, 1, C / 3}, true));
  auto run = [&](bool composed) {
    Generator data(4);
    Tensor x = Tensor::randn({B, T, C}, data, DType::Float64).set_requires_grad();
    attn.zero_grad();
    nn::AttentionTrace trace;
    const Tensor out =
        composed ? attn.forward_with_weights(x, x, masks, &trace).output : attn.forward(x, masks);
    sum(out * Tensor::randn(out.shape(), data, DType::Float64)).backward();
    std::vector<Tensor> results{out, x.grad()};
    for (const Tensor& p : attn.parameters()) results.push_back(p.grad());
    return results;
  };
  const std::vector<Tensor> tiled = run(false), composed = run(true);
  ASSERT_EQ(tiled.size(), composed.size());
  for (size_t i = 0; i < tiled.size(); ++i) {
    EXPECT_TRUE(allclose(tiled[i], composed[i], 1e-10, 1e-12)) << "tensor " << i;
  }
}

// The storage a causal self-attention's forward and backward allocate beyond their inputs and
// outputs: about linear in T on the tiled path (twice the positions, about twice the bytes),
// where the per-head path's weights make it quadratic.
TEST(TiledAttention, MemoryGrowsLinearlyWithTheSequence) {
  auto bytes_for = [](int64_t T, bool need_weights) {
    release_cached_storage();
    Generator data(9);
    Tensor qkv = Tensor::randn({1, T, 3 * 4, 8}, data).set_requires_grad();
    const size_t before = storage_stats().cached_bytes;
    {
      const FusedAttention r =
          fused_attention_packed(qkv, 4, 4, {.causal = true}, 0.3, need_weights);
      sum(r.output).backward();
    }
    // Everything the pass allocated is back in the pool now.
    return static_cast<double>(storage_stats().cached_bytes - before);
  };
  const int64_t T = 512;
  const double tiled = bytes_for(T, false), tiled_twice = bytes_for(2 * T, false);
  const double per_head = bytes_for(T, true), per_head_twice = bytes_for(2 * T, true);
  EXPECT_LT(tiled_twice / tiled, 2.5);
  EXPECT_GT(per_head_twice / per_head, 3.0);
  EXPECT_LT(tiled * 10, per_head);
}

}  // namespace test_attention_tiles
}  // namespace gradlab
