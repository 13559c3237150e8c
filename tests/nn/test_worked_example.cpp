// The attention tutorials the project grew from, executable: the worked 3x4 example (numbers
// pinned from the tutorial's text, read off the real module's output) and the shape walk and
// parameter-count facts.
#include <gtest/gtest.h>

#include "autograd/ops.h"
#include "nn/attention.h"

namespace gradlab::nn {
namespace test_worked_example {

// X of the worked example with W_Q = W_K = W_V = W_O = I, H = 2, D = 2.
AttentionTrace worked_example() {
  Generator gen(0);
  MultiHeadAttention attn({.d_model = 4, .num_heads = 2, .bias = false}, gen);
  const Tensor identity = tensor({{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}});
  for (auto& [_, p] : attn.named_parameters()) p.copy_from(identity);
  const Tensor x = tensor({{{1, 0, 1, 0}, {0, 1, 0, 1}, {1, 1, 0, 0}}});
  AttentionTrace trace;
  attn.forward_with_weights(x, x, {}, &trace);
  return trace;
}

TEST(WorkedExample, AttentionWeightsMatchTheTutorial) {
  const AttentionTrace trace = worked_example();
  ASSERT_EQ(trace.weights.shape(), (Shape{1, 2, 3, 3}));  // [B, H, Tq, Tk]
  // A^(1) and A^(2) as printed in the tutorial (4 decimals).
  const Tensor expected =
      tensor({{{{0.4011, 0.1978, 0.4011}, {0.1978, 0.4011, 0.4011}, {0.2483, 0.2483, 0.5035}},
               {{0.5035, 0.2483, 0.2483}, {0.2483, 0.5035, 0.2483}, {0.3333, 0.3333, 0.3333}}}});
  EXPECT_TRUE(allclose(trace.weights, expected, 0, 5e-5)) << trace.weights;
}

TEST(WorkedExample, ScaledScoresAreDividedBySqrtD) {
  const AttentionTrace trace = worked_example();
  // Head 1: Q K^T = [[1,0,1],[0,1,1],[1,1,2]], divided by sqrt(2).
  EXPECT_NEAR(trace.scores.at({0, 0, 2, 2}), 2.0, 1e-6);
  EXPECT_NEAR(trace.scaled_scores.at({0, 0, 2, 2}), 1.4142, 5e-5);
  EXPECT_NEAR(trace.scaled_scores.at({0, 0, 0, 1}), 0.0, 1e-7);
}

TEST(WorkedExample, OutputYMatchesTheTutorial) {
  const AttentionTrace trace = worked_example();
  ASSERT_EQ(trace.output.shape(), (Shape{1, 3, 4}));
  // Y from the tutorial; row 3 of head 1 is 0.7517 exactly (the tutorial's 0.7518 sums rounded
  // terms).
  const Tensor expected = tensor({{{0.8022, 0.5989, 0.5035, 0.2483},
                                   {0.5989, 0.8022, 0.2483, 0.5035},
                                   {0.7517, 0.7517, 0.3333, 0.3333}}});
  EXPECT_TRUE(allclose(trace.output, expected, 0, 5e-5)) << trace.output;
  // 2 * e^sqrt2 / (2 + ... ): the exact value is below 0.75175, so it rounds to 0.7517.
  EXPECT_LT(trace.output.at({0, 2, 0}), 0.75175);
  EXPECT_TRUE(allclose(trace.concat, trace.output, 0, 1e-7));  // W_O = I
}

TEST(WorkedExample, ShapeWalkWithUnequalSizes) {
  // The shape walk with every size different (B=2, T=5, C=12, H=3, D=4).
  Generator gen(1);
  MultiHeadAttention attn({.d_model = 12, .num_heads = 3}, gen);
  const Tensor x = Tensor::randn({2, 5, 12}, gen);
  AttentionTrace trace;
  attn.forward_with_weights(x, x, {}, &trace);
  EXPECT_EQ(trace.q.shape(), (Shape{2, 5, 12}));               // [B, T, H*D]
  EXPECT_EQ(trace.q_heads.shape(), (Shape{2, 3, 5, 4}));       // [B, H, T, D]
  EXPECT_EQ(trace.scores.shape(), (Shape{2, 3, 5, 5}));        // [B, H, Tq, Tk]
  EXPECT_EQ(trace.head_outputs.shape(), (Shape{2, 3, 5, 4}));  // [B, H, Tq, D]
  EXPECT_EQ(trace.output.shape(), (Shape{2, 5, 12}));          // [B, Tq, C]
  // Softmax runs along Tk: every query row sums to 1 (not every key column).
  const Tensor row_sums = sum(trace.weights, {-1});
  EXPECT_TRUE(allclose(row_sums, Tensor::ones({2, 3, 5}), 1e-5, 1e-6));
}

TEST(WorkedExample, ParameterCountIs4CSquaredWhateverH) {
  for (int64_t heads : {1, 2, 4, 8}) {
    Generator gen(0);
    MultiHeadAttention no_bias({.d_model = 64, .num_heads = heads, .bias = false}, gen);
    EXPECT_EQ(no_bias.num_parameters(), 4 * 64 * 64) << "H = " << heads;
    MultiHeadAttention with_bias({.d_model = 64, .num_heads = heads}, gen);
    EXPECT_EQ(with_bias.num_parameters(), 4 * 64 * 64 + 4 * 64) << "H = " << heads;
  }
}

TEST(WorkedExample, GroupedKeyValueHeadsShrinkKAndV) {
  Generator gen(0);
  // C = 64, H = 8, D = 8: K and V project to KV * D = 16 columns.
  MultiHeadAttention gqa({.d_model = 64, .num_heads = 8, .num_kv_heads = 2, .bias = false}, gen);
  EXPECT_EQ(gqa.num_parameters(), 2 * 64 * 64 + 2 * 64 * 16);
  EXPECT_EQ(gqa.k_proj->weight.shape(), (Shape{16, 64}));
  MultiHeadAttention mqa({.d_model = 64, .num_heads = 8, .num_kv_heads = 1, .bias = false}, gen);
  EXPECT_EQ(mqa.num_parameters(), 2 * 64 * 64 + 2 * 64 * 8);
}

TEST(WorkedExample, HeadsComeFromProjectionsNotFromSlicingX) {
  // With random projections, head 1's queries are not the first D columns of X.
  Generator gen(2);
  MultiHeadAttention attn({.d_model = 12, .num_heads = 3}, gen);
  const Tensor x = Tensor::randn({1, 5, 12}, gen);
  AttentionTrace trace;
  attn.forward_with_weights(x, x, {}, &trace);
  const Tensor head0 = reshape(narrow(trace.q_heads, 1, 0, 1), {5, 4});
  const Tensor x_slice = reshape(narrow(x, 2, 0, 4), {5, 4});
  EXPECT_FALSE(allclose(head0, x_slice, 1e-3, 1e-3));
  // ...but they are exactly the first D columns of the projection Q.
  EXPECT_TRUE(allclose(head0, reshape(narrow(trace.q, 2, 0, 4), {5, 4}), 0, 0));
}

}  // namespace test_worked_example
}  // namespace gradlab::nn
