// The reverse-mode engine: accumulation, shared subexpressions, grad mode, detach, freed
// graphs, explicit output gradients, misuse errors, and graphs 100k nodes deep. Every expected
// gradient is derived by hand in the comment above its assertion.
#include <gtest/gtest.h>

#include "tests/test_helpers.h"

#include <cmath>
#include <string>
#include <vector>

#include "autograd/graph.h"
#include "autograd/ops.h"

namespace gradlab {
namespace test_engine {

void expect_values(const Tensor& t, const Shape& shape, const std::vector<double>& values) {
  ASSERT_TRUE(t.defined());
  ASSERT_EQ(t.shape(), shape);
  const std::vector<double> got = t.to_vector();
  ASSERT_EQ(got.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(got[i], values[i]) << "at flat index " << i;
}

using testing::contains;

Tensor leaf(std::initializer_list<double> values) {
  return tensor(values, DType::Float64).set_requires_grad();
}

TEST(Engine, LeafAndOpBookkeeping) {
  Tensor x = leaf({1, 2, 3});
  EXPECT_TRUE(x.is_leaf());
  EXPECT_TRUE(x.requires_grad());
  EXPECT_STREQ(x.op_name(), "leaf");
  EXPECT_FALSE(x.grad().defined());  // no gradient before the first backward

  const Tensor y = x * x;
  EXPECT_FALSE(y.is_leaf());
  EXPECT_TRUE(y.requires_grad());
  EXPECT_STREQ(y.op_name(), "mul");

  // An op on inputs that do not require grad records nothing.
  const Tensor c = tensor({1, 2, 3}, DType::Float64);
  const Tensor z = c * c;
  EXPECT_TRUE(z.is_leaf());
  EXPECT_FALSE(z.requires_grad());
  EXPECT_STREQ(z.op_name(), "leaf");
}

TEST(Engine, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = leaf({1, -2, 3});
  // d sum(x^2) / dx = 2x = [2, -4, 6].
  sum(x * x).backward();
  expect_values(x.grad(), {3}, {2, -4, 6});
  // A second, fresh graph adds its gradient: [4, -8, 12].
  sum(x * x).backward();
  expect_values(x.grad(), {3}, {4, -8, 12});
  // A different function accumulates too: d sum(3x) / dx = 3 -> [7, -5, 15].
  sum(x * 3.0).backward();
  expect_values(x.grad(), {3}, {7, -5, 15});

  x.zero_grad();
  EXPECT_FALSE(x.grad().defined());
  sum(x * x).backward();
  expect_values(x.grad(), {3}, {2, -4, 6});
}

TEST(Engine, DiamondGraph) {
  // a = 2x feeds both branches of y = sum(a * a + a):
  // dy/da = 2a + 1, dy/dx = 2 (2a + 1) = 2 (4x + 1) = 8x + 2.
  Tensor x = leaf({1, -2, 0.5});
  const Tensor a = x * 2.0;
  const Tensor y = sum(a * a + a);
  // y = sum(4x^2 + 2x) = (4 + 2) + (16 - 4) + (1 + 1) = 20.
  EXPECT_EQ(y.item(), 20);
  y.backward();
  // 8x + 2 = [10, -14, 6].
  expect_values(x.grad(), {3}, {10, -14, 6});
}

TEST(Engine, DiamondWithUnequalBranches) {
  // Two different paths from x to y: y = sum(exp(x) * (x + 1)).
  // dy/dx = exp(x) (x + 1) + exp(x) = exp(x) (x + 2).
  Tensor x = leaf({0, 1, -1});
  sum(exp(x) * (x + 1.0)).backward();
  const std::vector<double> g = x.grad().to_vector();
  EXPECT_DOUBLE_EQ(g[0], 2.0);                  // e^0 * 2
  EXPECT_DOUBLE_EQ(g[1], 3.0 * std::exp(1.0));  // e * 3
  EXPECT_DOUBLE_EQ(g[2], std::exp(-1.0));       // e^-1 * 1
}

TEST(Engine, ValueUsedTwice) {
  // x * x: both inputs of mul are x, so d/dx = x + x = 2x.
  Tensor x = leaf({3, -0.5});
  sum(x * x).backward();
  expect_values(x.grad(), {2}, {6, -1});

  // x + x: d/dx = 2.
  x.zero_grad();
  sum(x + x).backward();
  expect_values(x.grad(), {2}, {2, 2});

  // x * x * x: d/dx = 3x^2 = [27, 0.75].
  x.zero_grad();
  sum(x * x * x).backward();
  expect_values(x.grad(), {2}, {27, 0.75});
}

TEST(Engine, BroadcastGradientIsSummedToTheInputShape) {
  // b [3] is broadcast over the 2 rows of a [2, 3]: d sum(a * b) / db_j = sum_i a_ij.
  Tensor a = tensor({{1, 2, 3}, {4, 5, 6}}, DType::Float64).set_requires_grad();
  Tensor b = leaf({10, 20, 30});
  sum(a * b).backward();
  expect_values(b.grad(), {3}, {5, 7, 9});
  // d/da_ij = b_j, in a's own shape.
  expect_values(a.grad(), {2, 3}, {10, 20, 30, 10, 20, 30});
}

TEST(Engine, NoGradGuardRecordsNothing) {
  Tensor x = leaf({1, 2});
  EXPECT_TRUE(grad_enabled());
  {
    NoGradGuard guard;
    EXPECT_FALSE(grad_enabled());
    const Tensor y = sum(exp(x) * x);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_TRUE(y.is_leaf());
    EXPECT_STREQ(y.op_name(), "leaf");
    EXPECT_THROW(y.backward(), GraphError);
    {
      NoGradGuard nested;
      EXPECT_FALSE(grad_enabled());
    }
    EXPECT_FALSE(grad_enabled());  // leaving the inner guard keeps grad mode off
  }
  EXPECT_TRUE(grad_enabled());
  const Tensor z = x * 2.0;
  EXPECT_TRUE(z.requires_grad());
  EXPECT_STREQ(z.op_name(), "mul_scalar");
}

TEST(Engine, DetachSharesValuesWithoutGrad) {
  Tensor x = leaf({1, 2, 3});
  Tensor d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  EXPECT_FALSE(d.same(x));
  expect_values(d, {3}, {1, 2, 3});
  // Same storage: a write through one handle shows through the other.
  d.mutable_data<double>()[1] = 20;
  EXPECT_EQ(x.at({1}), 20);

  // The detached copy is a constant: d sum(d * x) / dx = d = [1, 20, 3], and d gets nothing.
  sum(d * x).backward();
  expect_values(x.grad(), {3}, {1, 20, 3});
  EXPECT_FALSE(d.grad().defined());

  // Detaching an op result cuts the graph there.
  const Tensor y = (x * x).detach();
  EXPECT_FALSE(y.requires_grad());
  EXPECT_STREQ(y.op_name(), "leaf");
}

TEST(Engine, SecondBackwardThroughFreedGraphThrows) {
  Tensor x = leaf({1, 2});
  const Tensor y = sum(x * x);
  y.backward();
  expect_values(x.grad(), {2}, {2, 4});
  try {
    y.backward();
    FAIL() << "expected GraphError";
  } catch (const GraphError& e) {
    EXPECT_TRUE(contains(e.what(), "retain_graph")) << e.what();
    EXPECT_TRUE(contains(e.what(), "freed")) << e.what();
  }
  // The failed call did not touch the gradient.
  expect_values(x.grad(), {2}, {2, 4});
}

TEST(Engine, SharedSubgraphFreedByAnotherBackwardThrows) {
  Tensor x = leaf({1, 2});
  const Tensor z = x * x;
  const Tensor y1 = sum(z);
  const Tensor y2 = sum(z * 3.0);
  y1.backward();  // frees z's node
  try {
    y2.backward();
    FAIL() << "expected GraphError";
  } catch (const GraphError& e) {
    EXPECT_TRUE(contains(e.what(), "retain_graph")) << e.what();
    EXPECT_TRUE(contains(e.what(), "mul")) << e.what();  // names the op that was freed
  }
}

TEST(Engine, RetainGraphAllowsASecondBackward) {
  Tensor x = leaf({1, 2, -3});
  const Tensor y = sum(x * x * 0.5);  // dy/dx = x
  y.backward(true);
  expect_values(x.grad(), {3}, {1, 2, -3});
  y.backward(true);  // the gradient doubles
  expect_values(x.grad(), {3}, {2, 4, -6});
  y.backward();  // the last pass may free the graph
  expect_values(x.grad(), {3}, {3, 6, -9});
  EXPECT_THROW(y.backward(), GraphError);
}

TEST(Engine, ExplicitGradientForANonScalarOutput) {
  // y = x * w with w [3] broadcast over x [2, 3]; backward(g) gives dx = g * w and
  // dw_j = sum_i g_ij x_ij.
  Tensor x = tensor({{1, 2, 3}, {4, 5, 6}}, DType::Float64).set_requires_grad();
  Tensor w = leaf({2, -1, 0.5});
  const Tensor y = x * w;
  const Tensor g = tensor({{1, 0, 2}, {-1, 3, 4}}, DType::Float64);
  y.backward(g);
  // dx = [[1*2, 0*-1, 2*0.5], [-1*2, 3*-1, 4*0.5]].
  expect_values(x.grad(), {2, 3}, {2, 0, 1, -2, -3, 2});
  // dw = [1*1 + -1*4, 0*2 + 3*5, 2*3 + 4*6] = [-3, 15, 30].
  expect_values(w.grad(), {3}, {-3, 15, 30});
}

TEST(Engine, NonScalarBackwardWithoutGradientThrows) {
  Tensor x = leaf({1, 2, 3});
  const Tensor y = x * 2.0;
  try {
    y.backward();
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(contains(e.what(), "scalar")) << e.what();
    EXPECT_TRUE(contains(e.what(), "[3]")) << e.what();
  }
  EXPECT_FALSE(x.grad().defined());
}

TEST(Engine, ExplicitGradientMustMatchShapeAndDtype) {
  Tensor x = tensor({{1, 2, 3}, {4, 5, 6}}, DType::Float64).set_requires_grad();
  const Tensor y = x * 2.0;
  EXPECT_THROW(y.backward(Tensor::ones({3, 2}, DType::Float64)), ShapeError);
  EXPECT_THROW(y.backward(Tensor::ones({2, 3}, DType::Float32)), DTypeError);
  EXPECT_FALSE(x.grad().defined());
}

TEST(Engine, BackwardOnATensorNotRequiringGradThrows) {
  const Tensor c = tensor({1, 2}, DType::Float64);
  try {
    sum(c * c).backward();
    FAIL() << "expected GraphError";
  } catch (const GraphError& e) {
    EXPECT_TRUE(contains(e.what(), "does not require grad")) << e.what();
  }
}

TEST(Engine, BackwardFromALeaf) {
  // A scalar leaf is its own output: dx/dx = 1.
  Tensor x = Tensor::scalar(5.0, DType::Float64).set_requires_grad();
  x.backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().item(), 1.0);
}

TEST(Engine, GradientsOfInputsNotRequiringGradStayUndefined) {
  Tensor x = leaf({1, 2, 3});
  Tensor c = tensor({4, 5, 6}, DType::Float64);  // a constant
  Tensor d = tensor({1, 1, 1}, DType::Float64);
  sum(x * c + d).backward();
  expect_values(x.grad(), {3}, {4, 5, 6});
  EXPECT_FALSE(c.grad().defined());
  EXPECT_FALSE(d.grad().defined());

  // A leaf that requires grad but is not on the path to the output gets nothing either.
  Tensor unused = leaf({1});
  sum(x * 2.0).backward();
  EXPECT_FALSE(unused.grad().defined());
}

TEST(Engine, SetRequiresGradOnANonLeafThrows) {
  Tensor x = leaf({1, 2});
  Tensor y = x * x;
  try {
    y.set_requires_grad();
    FAIL() << "expected GraphError";
  } catch (const GraphError& e) {
    EXPECT_TRUE(contains(e.what(), "leaf")) << e.what();
    EXPECT_TRUE(contains(e.what(), "mul")) << e.what();
  }
  // Detaching first makes a leaf that can be marked.
  Tensor d = y.detach();
  d.set_requires_grad();
  EXPECT_TRUE(d.requires_grad());
}

TEST(Engine, LeafGradientIsACopy) {
  // The stored gradient must not alias the seed or another tensor's gradient.
  Tensor x = leaf({1, 2});
  Tensor g = tensor({3, 4}, DType::Float64);
  x.backward(g);
  expect_values(x.grad(), {2}, {3, 4});
  g.mutable_data<double>()[0] = 100;
  EXPECT_EQ(x.grad().at({0}), 3);
}

constexpr int kChain = 100000;

TEST(Engine, DeepAddChain) {
  Tensor x = Tensor::scalar(0.0, DType::Float64).set_requires_grad();
  Tensor y = x;
  for (int i = 0; i < kChain; ++i) y = y + 1.0;
  // 100000 additions of 1 are exact in float64; dy/dx = 1.
  EXPECT_EQ(y.item(), kChain);
  y.backward();
  EXPECT_EQ(x.grad().item(), 1.0);
}

TEST(Engine, DeepMulChain) {
  Tensor x = Tensor::scalar(1.0, DType::Float64).set_requires_grad();
  Tensor y = x;
  for (int i = 0; i < kChain; ++i) y = y * 1.0001;
  // y = 1.0001^100000 x, so dy/dx = 1.0001^100000 (about e^9.9995 = 22015). Each of the 100000
  // roundings in forward and backward is at most 2^-53 relative, 1.1e-11 in total; 1e-10
  // bounds that.
  const double expected = std::pow(1.0001, kChain);
  EXPECT_NEAR(y.item(), expected, 1e-10 * expected);
  y.backward(true);  // keep the graph: it is destroyed intact below
  EXPECT_NEAR(x.grad().item(), expected, 1e-10 * expected);
  y = Tensor();  // dropping the last handle releases all 100000 nodes
  EXPECT_TRUE(x.is_leaf());
  EXPECT_NEAR(x.grad().item(), expected, 1e-10 * expected);
}

TEST(Engine, DestroyingADeepGraphWithoutBackward) {
  Tensor x = tensor({1, 2, 3}).set_requires_grad();
  {
    Tensor y = x;
    for (int i = 0; i < 2 * kChain; ++i) y = tanh(y);
    EXPECT_TRUE(y.requires_grad());
  }  // 200000 unary nodes released here without recursion
  EXPECT_FALSE(x.grad().defined());
  EXPECT_EQ(x.at({2}), 3);
}

}  // namespace test_engine
}  // namespace gradlab
