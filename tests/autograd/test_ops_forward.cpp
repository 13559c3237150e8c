// Forward values of every op on small tensors, computed by hand (or from the defining formula
// with <cmath> in the test), plus the few gradients that gradient checking cannot pin down:
// ties, masked rows, ignored targets and repeated ids. Axes have unequal sizes throughout so
// that a swapped axis changes a shape or a value.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "autograd/graph.h"
#include "autograd/ops.h"
#include "tests/test_helpers.h"

namespace gradlab {
namespace test_ops_forward {

constexpr double kInf = std::numeric_limits<double>::infinity();
// float32 results of one or two roundings against a double reference: a few units in the last
// place (2^-24 = 6e-8 relative each).
constexpr double kF32 = 4e-7;
// float64 results of a few roundings against a double reference.
constexpr double kF64 = 1e-14;

using testing::expect_exact;

// Shape equal and |got - want| <= tol * max(1, |want|) everywhere.
void expect_close(const Tensor& t, const Shape& shape, const std::vector<double>& values,
                  double tol) {
  ASSERT_TRUE(t.defined());
  ASSERT_EQ(t.shape(), shape);
  const std::vector<double> got = t.to_vector();
  ASSERT_EQ(got.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_NEAR(got[i], values[i], tol * std::max(1.0, std::abs(values[i])))
        << "at flat index " << i;
  }
}

// 0, 1, ..., numel - 1 in the given shape.
Tensor iota(const Shape& shape, DType dtype = DType::Float32) {
  return reshape(Tensor::arange(numel(shape), dtype), shape);
}

// --- Element-wise binary ops with broadcasting ---------------------------------------------

TEST(OpsForward, AddSubRowBroadcast) {
  const Tensor a = tensor({{1, 2, 3}, {4, 5, 6}});  // [2, 3]
  const Tensor b = tensor({10, 20, 30});            // [3], broadcast over the rows
  expect_exact(add(a, b), {2, 3}, {11, 22, 33, 14, 25, 36});
  expect_exact(b + a, {2, 3}, {11, 22, 33, 14, 25, 36});
  expect_exact(sub(a, b), {2, 3}, {-9, -18, -27, -6, -15, -24});
  expect_exact(b - a, {2, 3}, {9, 18, 27, 6, 15, 24});
}

TEST(OpsForward, MulDivOuterBroadcast) {
  const Tensor col = Tensor::from_vector(std::vector<double>{2, 3}, {2, 1});  // [2, 1]
  const Tensor row = tensor({{5, 7, 11}});                                    // [1, 3]
  // [2, 1] * [1, 3] is the outer product [2, 3].
  expect_exact(mul(col, row), {2, 3}, {10, 14, 22, 15, 21, 33});
  expect_exact(row * col, {2, 3}, {10, 14, 22, 15, 21, 33});
  // [2, 3] / [2, 1] divides row i by col[i].
  const Tensor a = tensor({{1, 2, 3}, {4, 5, 6}});
  expect_exact(div(a, Tensor::from_vector(std::vector<double>{2, 4}, {2, 1})), {2, 3},
               {0.5, 1, 1.5, 1, 1.25, 1.5});
  // [1, 3] / [2, 1]: entry [i, j] = row[j] / col[i].
  expect_close(row / col, {2, 3}, {5.0 / 2, 7.0 / 2, 11.0 / 2, 5.0 / 3, 7.0 / 3, 11.0 / 3}, kF32);
}

TEST(OpsForward, BroadcastAcrossRanks) {
  // [2, 1, 5] + [3, 1] -> [2, 3, 5] with out[i, j, k] = a[i, 0, k] + b[j, 0] = 5i + k + 100j.
  const Tensor a = iota({2, 1, 5});
  const Tensor b = Tensor::from_vector(std::vector<double>{0, 100, 200}, {3, 1});
  const Tensor out = a + b;
  ASSERT_EQ(out.shape(), (Shape{2, 3, 5}));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 5; ++k) EXPECT_EQ(out.at({i, j, k}), 5 * i + k + 100 * j);
  // A rank-0 operand broadcasts to anything.
  expect_exact(tensor({{1, 2, 3}}) * Tensor::scalar(-2), {1, 3}, {-2, -4, -6});
}

TEST(OpsForward, ScalarFormsAndOperators) {
  const Tensor x = tensor({1, 2, 4, -8});
  expect_exact(x + 2.0, {4}, {3, 4, 6, -6});
  expect_exact(2.0 + x, {4}, {3, 4, 6, -6});
  expect_exact(add(x, 2.0), {4}, {3, 4, 6, -6});
  expect_exact(x - 2.0, {4}, {-1, 0, 2, -10});
  expect_exact(2.0 - x, {4}, {1, 0, -2, 10});  // the scalar on the left: 2 - x
  expect_exact(rsub(x, 2.0), {4}, {1, 0, -2, 10});
  expect_exact(x * 3.0, {4}, {3, 6, 12, -24});
  expect_exact(3.0 * x, {4}, {3, 6, 12, -24});
  expect_exact(x / 4.0, {4}, {0.25, 0.5, 1, -2});
  expect_exact(3.0 / x, {4}, {3, 1.5, 0.75, -0.375});  // 3 / x, not x / 3
  expect_exact(rdiv(x, 3.0), {4}, {3, 1.5, 0.75, -0.375});
  expect_exact(-x, {4}, {-1, -2, -4, 8});
  expect_exact(neg(x), {4}, {-1, -2, -4, 8});
}

// --- Element-wise unary ops -----------------------------------------------------------------

TEST(OpsForward, Pow) {
  expect_exact(pow(tensor({1, 2, 3}), 3), {3}, {1, 8, 27});
  expect_exact(pow(tensor({-2, 0.5}), 2), {2}, {4, 0.25});  // integer exponents allow x < 0
  expect_close(pow(tensor({4, 9, 2.25}), 0.5), {3}, {2, 3, 1.5}, kF32);
  expect_close(pow(tensor({2, 4}), -1), {2}, {0.5, 0.25}, kF32);
  expect_close(pow(tensor({8, 27}), 1.0 / 3.0), {2}, {2, 3}, kF32);
  expect_exact(pow(tensor({5, -3}), 0), {2}, {1, 1});
}

TEST(OpsForward, ExpLogSqrt) {
  const double e = std::numbers::e;
  expect_close(exp(tensor({0, 1, -1, 2})), {4}, {1, e, 1 / e, e * e}, kF32);
  expect_close(log(tensor({1, 0.5, 10, 1024})), {4},
               {0, -std::numbers::ln2, std::numbers::ln10, 10 * std::numbers::ln2}, kF32);
  EXPECT_EQ(log(tensor({0})).item(), -kInf);
  EXPECT_TRUE(std::isnan(log(tensor({-1})).item()));
  expect_close(sqrt(tensor({0, 4, 2, 0.25})), {4}, {0, 2, std::numbers::sqrt2, 0.5}, kF32);
}

TEST(OpsForward, TanhFromItsDefinition) {
  const std::vector<double> xs = {0, 0.5, -2, 20};
  std::vector<double> want;
  // tanh x = (e^2x - 1) / (e^2x + 1).
  for (double x : xs) want.push_back((std::exp(2 * x) - 1) / (std::exp(2 * x) + 1));
  expect_close(tanh(Tensor::from_vector(xs, {4})), {4}, want, kF32);
  expect_close(tanh(Tensor::from_vector(xs, {4}, DType::Float64)), {4}, want, kF64);
  EXPECT_EQ(tanh(tensor({20})).item(), 1.0);  // saturates exactly in float32
}

TEST(OpsForward, Relu) {
  expect_exact(relu(tensor({{-1.5, 0, 2}, {7, -0.25, 0.125}})), {2, 3}, {0, 0, 2, 7, 0, 0.125});
}

TEST(OpsForward, GeluIsTheExactErfForm) {
  const std::vector<double> xs = {-3, -1, -0.5, 0, 0.5, 1, 2, 6};
  std::vector<double> want;
  // x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)).
  for (double x : xs) want.push_back(0.5 * x * (1 + std::erf(x / std::sqrt(2.0))));
  expect_close(gelu(Tensor::from_vector(xs, {8})), {8}, want, kF32);
  expect_close(gelu(Tensor::from_vector(xs, {8}, DType::Float64)), {8}, want, kF64);
  // Phi(1) = 0.8413447460685429 (the standard normal table value), so gelu(1) = Phi(1).
  const double g1 = gelu(tensor({1}, DType::Float64)).item();
  EXPECT_NEAR(g1, 0.8413447460685429, kF64);
  // Not the tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), which at x = 1
  // is 0.84119, 1.5e-4 away.
  const double approx = 0.5 * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (1 + 0.044715)));
  EXPECT_GT(std::abs(g1 - approx), 1e-4);
}

// The backward reads Phi(x) back from the output as y / x, except at 0. 37 points from -6 to 6
// put 0 in a vector block (16 elements), 5 points around it put 0 in the tail.
TEST(OpsForward, GeluGradientIsPhiPlusXTimesTheDensity) {
  for (const int points : {37, 5}) {
    std::vector<double> xs, want;
    for (int i = 0; i < points; ++i) {
      const double x = (i - points / 2) / 3.0;
      xs.push_back(x);
      want.push_back(0.5 * (1 + std::erf(x / std::sqrt(2.0))) +
                     x * std::exp(-x * x / 2) / std::sqrt(2 * std::numbers::pi));
    }
    EXPECT_EQ(xs[points / 2], 0.0);
    for (const DType dtype : {DType::Float32, DType::Float64}) {
      Tensor x = Tensor::from_vector(xs, {points}, dtype);
      x.set_requires_grad();
      sum(gelu(x)).backward();
      expect_close(x.grad(), {points}, want, dtype == DType::Float32 ? kF32 : kF64);
    }
  }
}

// --- Reductions -----------------------------------------------------------------------------

TEST(OpsForward, SumOverAllAndAxes) {
  const Tensor x = iota({2, 3, 5});  // x[i, j, k] = 15i + 5j + k
  // 0 + ... + 29 = 29 * 30 / 2 = 435.
  const Tensor all = sum(x);
  EXPECT_EQ(all.shape(), Shape{});
  EXPECT_EQ(all.item(), 435);

  // Axis 0: x[0, j, k] + x[1, j, k] = 15 + 10j + 2k.
  const Tensor s0 = sum(x, {0});
  ASSERT_EQ(s0.shape(), (Shape{3, 5}));
  for (int64_t j = 0; j < 3; ++j)
    for (int64_t k = 0; k < 5; ++k) EXPECT_EQ(s0.at({j, k}), 15 + 10 * j + 2 * k);

  // Axis 1: sum_j (15i + 5j + k) = 45i + 15 + 3k.
  const Tensor s1 = sum(x, {1});
  ASSERT_EQ(s1.shape(), (Shape{2, 5}));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t k = 0; k < 5; ++k) EXPECT_EQ(s1.at({i, k}), 45 * i + 15 + 3 * k);

  // Axis 2 (also -1): sum_k (15i + 5j + k) = 75i + 25j + 10.
  const Tensor s2 = sum(x, {-1});
  ASSERT_EQ(s2.shape(), (Shape{2, 3}));
  expect_exact(s2, {2, 3}, {10, 35, 60, 85, 110, 135});

  // Axes 0 and 2: sum_i sum_k (15i + 5j + k) = 75 + 50j + 20 = 95 + 50j.
  expect_exact(sum(x, {0, 2}), {3}, {95, 145, 195});
}

TEST(OpsForward, SumKeepdimShapes) {
  const Tensor x = iota({2, 3, 5});
  const Tensor k1 = sum(x, {1}, true);
  ASSERT_EQ(k1.shape(), (Shape{2, 1, 5}));
  EXPECT_EQ(k1.at({1, 0, 4}), 45 + 15 + 12);  // 45i + 15 + 3k at i = 1, k = 4
  const Tensor k02 = sum(x, {0, 2}, true);
  expect_exact(k02, {1, 3, 1}, {95, 145, 195});
  EXPECT_EQ(sum(x, {0, 1, 2}, true).shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(sum(x, {0, 1, 2}, true).item(), 435);
}

TEST(OpsForward, MeanOverAllAndAxes) {
  const Tensor x = iota({2, 3, 5});
  EXPECT_DOUBLE_EQ(mean(x).item(), 14.5);  // 435 / 30
  // Axis 1: (45i + 15 + 3k) / 3 = 15i + 5 + k.
  std::vector<double> want;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t k = 0; k < 5; ++k) want.push_back(15.0 * i + 5 + k);
  expect_close(mean(x, {1}), {2, 5}, want, kF32);
  EXPECT_EQ(mean(x, {1}, true).shape(), (Shape{2, 1, 5}));
  // Axes 0 and 2 with keepdim: (95 + 50j) / 10.
  expect_close(mean(x, {0, 2}, true), {1, 3, 1}, {9.5, 14.5, 19.5}, kF32);
}

// Reducing an axis of size 1 without keepdim should drop it, as for any other axis (NumPy and
// PyTorch give [2, 3] below). sum and mean keep it: [2, 1, 3].
TEST(OpsForward, SumOverAUnitAxisDropsIt) {
  const Tensor x = iota({2, 1, 3});
  EXPECT_EQ(sum(x, {1}).shape(), (Shape{2, 3}));
  EXPECT_EQ(mean(x, {1}).shape(), (Shape{2, 3}));
  EXPECT_EQ(sum(iota({1, 3}), {0}).shape(), (Shape{3}));
}

TEST(OpsForward, MaxAndArgmaxWithTies) {
  const Tensor x = tensor({{1, 5, 5}, {7, -2, 7}});
  // Along axis 1: row maxima 5 and 7, each first reached at column 1 and column 0.
  expect_exact(max(x, 1), {2}, {5, 7});
  expect_exact(max(x, -1, true), {2, 1}, {5, 7});
  const Indices a1 = argmax(x, 1);
  EXPECT_EQ(a1.shape, Shape{2});
  EXPECT_EQ(a1.values, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(argmax(x, 1, true).shape, (Shape{2, 1}));
  // Along axis 0: column maxima 7, 5, 7 in rows 1, 0, 1 (column 2 is no tie: 5 < 7).
  expect_exact(max(x, 0), {3}, {7, 5, 7});
  expect_exact(max(x, 0, true), {1, 3}, {7, 5, 7});
  EXPECT_EQ(argmax(x, 0).values, (std::vector<int64_t>{1, 0, 1}));
  // An all-equal column ties everywhere: the first index wins.
  EXPECT_EQ(argmax(tensor({{3, 1}, {3, 0}, {3, 2}}), 0).values, (std::vector<int64_t>{0, 2}));
}

TEST(OpsForward, MaxGradientGoesToTheFirstMaximum) {
  Tensor x = tensor({{1, 5, 5}, {7, -2, 7}}, DType::Float64).set_requires_grad();
  sum(max(x, 1)).backward();
  expect_exact(x.grad(), {2, 3}, {0, 1, 0, 1, 0, 0});
}

TEST(OpsForward, MaxAlongTheMiddleAxis) {
  // x[i, j, k] = 10 + i + k where j = (i + k) % 3, else j: the maximum along axis 1 sits at
  // j = (i + k) % 3 and equals 10 + i + k.
  std::vector<double> v;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 5; ++k)
        v.push_back(j == (i + k) % 3 ? 10.0 + i + k : static_cast<double>(j));
  const Tensor x = Tensor::from_vector(v, {2, 3, 5});
  const Tensor m = max(x, 1);
  const Indices am = argmax(x, 1);
  ASSERT_EQ(m.shape(), (Shape{2, 5}));
  ASSERT_EQ(am.shape, (Shape{2, 5}));
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t k = 0; k < 5; ++k) {
      EXPECT_EQ(m.at({i, k}), 10 + i + k);
      EXPECT_EQ(am.values[i * 5 + k], (i + k) % 3);
    }
  }
}

// --- matmul ----------------------------------------------------------------------------------

TEST(OpsForward, Matmul2D) {
  const Tensor a = tensor({{1, 2, 3}, {4, 5, 6}});  // [2, 3]
  const Tensor b = iota({3, 5});                    // b[k, n] = 5k + n
  // Row 0: 1 n + 2 (5 + n) + 3 (10 + n) = 40 + 6n.
  // Row 1: 4 n + 5 (5 + n) + 6 (10 + n) = 85 + 15n.
  expect_exact(matmul(a, b), {2, 5}, {40, 46, 52, 58, 64, 85, 100, 115, 130, 145});
}

TEST(OpsForward, MatmulBatchedWithBroadcastBatchAxes) {
  // a [2, 1, 2, 3] with a[i, 0] = A + 10i, b [3, 3, 5] with b[j] = (j + 1) B, where A and B are
  // the matrices of Matmul2D (A @ B = C). Batch axes [2, 1] and [3] broadcast to [2, 3], and
  // out[i, j] = (A + 10i) @ (j + 1) B = (j + 1) (C + 10i * colsum(B)), colsum(B)[n] = 15 + 3n.
  const Tensor base = tensor({{1, 2, 3}, {4, 5, 6}});
  const Tensor a = reshape(concat({base, base + 10.0}, 0), {2, 1, 2, 3});
  const Tensor bm = iota({3, 5});
  const Tensor b = reshape(concat({bm, bm * 2.0, bm * 3.0}, 0), {3, 3, 5});
  const Tensor out = matmul(a, b);
  ASSERT_EQ(out.shape(), (Shape{2, 3, 2, 5}));
  // [0, 0] is C itself: C[0, 0] = 40, C[1, 4] = 145.
  EXPECT_EQ(out.at({0, 0, 0, 0}), 40);
  EXPECT_EQ(out.at({0, 0, 1, 4}), 145);
  // [0, 1, 1, 0] = 2 * C[1, 0] = 170.
  EXPECT_EQ(out.at({0, 1, 1, 0}), 170);
  // [1, 2, 0, 4] = 3 * (C[0, 4] + 10 * (15 + 12)) = 3 * (64 + 270) = 1002.
  EXPECT_EQ(out.at({1, 2, 0, 4}), 1002);
  // [1, 0, 1, 2] = 1 * (C[1, 2] + 10 * (15 + 6)) = 115 + 210 = 325.
  EXPECT_EQ(out.at({1, 0, 1, 2}), 325);
  // [1, 1, 0, 1] = 2 * (C[0, 1] + 10 * 18) = 2 * (46 + 180) = 452.
  EXPECT_EQ(out.at({1, 1, 0, 1}), 452);
}

TEST(OpsForward, MatmulBatchedTimesAMatrix) {
  // a [2, 2, 3] with a[i] = A + 10i, times the 2-D B [3, 5]:
  // out[i] = C + 10i * colsum(B); out[1, 1, 3] = 130 + 10 * 24 = 370.
  const Tensor base = tensor({{1, 2, 3}, {4, 5, 6}});
  const Tensor a = reshape(concat({base, base + 10.0}, 0), {2, 2, 3});
  const Tensor out = matmul(a, iota({3, 5}));
  ASSERT_EQ(out.shape(), (Shape{2, 2, 5}));
  EXPECT_EQ(out.at({0, 1, 3}), 130);
  EXPECT_EQ(out.at({1, 1, 3}), 370);
  EXPECT_EQ(out.at({1, 0, 0}), 40 + 150);  // 40 + 10 * 15
}

TEST(OpsForward, MatmulFloat64) {
  // [[0.1, 0.2]] @ [[0.3], [0.7]] = 0.03 + 0.14 = 0.17, with float64 rounding only.
  const Tensor a = tensor({{0.1, 0.2}, {1, -1}, {2, 0.5}}, DType::Float64);          // [3, 2]
  const Tensor b = tensor({{0.3, 1, 2, 3, 4}, {0.7, -1, 0, 1, 2}}, DType::Float64);  // [2, 5]
  const Tensor out = matmul(a, b);
  EXPECT_EQ(out.dtype(), DType::Float64);
  ASSERT_EQ(out.shape(), (Shape{3, 5}));
  EXPECT_NEAR(out.at({0, 0}), 0.1 * 0.3 + 0.2 * 0.7, kF64);
  EXPECT_NEAR(out.at({1, 1}), 2, kF64);  // 1 * 1 + -1 * -1
  EXPECT_NEAR(out.at({2, 4}), 9, kF64);  // 2 * 4 + 0.5 * 2
  EXPECT_NEAR(out.at({1, 0}), 0.3 - 0.7, kF64);
}

TEST(OpsForward, MatmulBatchedWithEmptyInnerAxisGivesZeros) {
  // A sum over zero terms: [2, 3, 0] @ [2, 0, 5] is a [2, 3, 5] block of zeros.
  expect_exact(matmul(Tensor::ones({2, 3, 0}), Tensor::ones({2, 0, 5})), {2, 3, 5},
               std::vector<double>(30, 0.0));
}

// The same with a 2-D right operand should also give zeros (as NumPy and PyTorch do), but
// matmul folds a's rows with an internal reshape to [-1, 0], which cannot infer the -1 and
// throws "reshape: cannot reshape [3,0] (0 elements) into [-1,0]".
TEST(OpsForward, MatmulWithEmptyInnerAxisAndMatrixOperandGivesZeros) {
  expect_exact(matmul(Tensor::ones({3, 0}), Tensor::ones({0, 5})), {3, 5},
               std::vector<double>(15, 0.0));
  expect_exact(matmul(Tensor::ones({2, 3, 0}), Tensor::ones({0, 5})), {2, 3, 5},
               std::vector<double>(30, 0.0));
}

// --- Shape ops ------------------------------------------------------------------------------

TEST(OpsForward, ReshapeWithInferredAxis) {
  const Tensor x = iota({2, 3, 5});
  const Tensor r = reshape(x, {5, -1});
  ASSERT_EQ(r.shape(), (Shape{5, 6}));
  EXPECT_EQ(r.at({4, 5}), 29);
  EXPECT_EQ(r.at({2, 3}), 15);  // 2 * 6 + 3
  EXPECT_EQ(reshape(x, {-1}).shape(), Shape{30});
  const Tensor r3 = reshape(x, {3, -1, 2});
  ASSERT_EQ(r3.shape(), (Shape{3, 5, 2}));
  EXPECT_EQ(r3.at({2, 1, 1}), 23);  // 2 * 10 + 1 * 2 + 1
}

TEST(OpsForward, TransposeValues) {
  const Tensor x = iota({2, 3, 5});  // x[i, j, k] = 15i + 5j + k
  const Tensor t = transpose(x, 0, 2);
  ASSERT_EQ(t.shape(), (Shape{5, 3, 2}));
  for (int64_t k = 0; k < 5; ++k)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t i = 0; i < 2; ++i) EXPECT_EQ(t.at({k, j, i}), 15 * i + 5 * j + k);
  EXPECT_EQ(t.at({4, 1, 1}), 24);
  // Negative axes: transpose(x, -1, 0) is the same swap.
  EXPECT_EQ(transpose(x, -1, 0).to_vector(), t.to_vector());
  // 2-D transpose of [[1, 2, 3], [4, 5, 6]].
  expect_exact(transpose(tensor({{1, 2, 3}, {4, 5, 6}}), 0, 1), {3, 2}, {1, 4, 2, 5, 3, 6});
}

TEST(OpsForward, PermuteValues) {
  const Tensor x = iota({2, 3, 5});
  // Result axis i is x's axis dims[i]: y[j, k, i] = x[i, j, k].
  const Tensor y = permute(x, {1, 2, 0});
  ASSERT_EQ(y.shape(), (Shape{3, 5, 2}));
  for (int64_t j = 0; j < 3; ++j)
    for (int64_t k = 0; k < 5; ++k)
      for (int64_t i = 0; i < 2; ++i) EXPECT_EQ(y.at({j, k, i}), 15 * i + 5 * j + k);
  EXPECT_EQ(y.at({2, 4, 1}), 29);
  EXPECT_EQ(y.at({1, 3, 0}), 8);
  // The other 3-cycle: z[k, i, j] = x[i, j, k].
  const Tensor z = permute(x, {2, 0, 1});
  ASSERT_EQ(z.shape(), (Shape{5, 2, 3}));
  EXPECT_EQ(z.at({3, 1, 2}), 15 + 10 + 3);
  // The identity permutation copies.
  EXPECT_EQ(permute(x, {0, 1, 2}).to_vector(), x.to_vector());
}

TEST(OpsForward, Concat) {
  const Tensor a = tensor({{1, 2, 3}, {4, 5, 6}});  // [2, 3]
  // Axis 0: [2, 3] and [1, 3] -> [3, 3].
  expect_exact(concat({a, tensor({{7, 8, 9}})}, 0), {3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  // Axis 1 (also -1): [2, 3] and [2, 2] -> [2, 5].
  expect_exact(concat({a, tensor({{10, 20}, {30, 40}})}, -1), {2, 5},
               {1, 2, 3, 10, 20, 4, 5, 6, 30, 40});
  // The middle axis of [2, 3, 5] and [2, 1, 5] -> [2, 4, 5]: row 3 of each block is the
  // second tensor's.
  const Tensor x = iota({2, 3, 5});
  const Tensor y = iota({2, 1, 5}) + 100.0;  // y[i, 0, k] = 100 + 5i + k
  const Tensor c = concat({x, y}, 1);
  ASSERT_EQ(c.shape(), (Shape{2, 4, 5}));
  EXPECT_EQ(c.at({1, 2, 4}), 29);
  EXPECT_EQ(c.at({1, 3, 4}), 109);
  EXPECT_EQ(c.at({0, 3, 0}), 100);
  // Three tensors at once.
  expect_exact(concat({tensor({1}), tensor({2, 3}), tensor({4, 5, 6})}, 0), {6},
               {1, 2, 3, 4, 5, 6});
}

TEST(OpsForward, Narrow) {
  const Tensor x = iota({2, 7});
  // Columns [2, 5) of each row.
  expect_exact(narrow(x, 1, 2, 3), {2, 3}, {2, 3, 4, 9, 10, 11});
  expect_exact(narrow(x, 0, 1, 1), {1, 7}, {7, 8, 9, 10, 11, 12, 13});
  expect_exact(narrow(x, -1, 6, 1), {2, 1}, {6, 13});
  // The middle axis of [2, 3, 5]: x[i, 1:3, k].
  const Tensor m = narrow(iota({2, 3, 5}), 1, 1, 2);
  ASSERT_EQ(m.shape(), (Shape{2, 2, 5}));
  EXPECT_EQ(m.at({1, 1, 4}), 15 + 10 + 4);
  EXPECT_EQ(m.at({0, 0, 0}), 5);
  EXPECT_EQ(narrow(x, 1, 3, 0).numel(), 0);
}

// --- Softmax family ---------------------------------------------------------------------------

TEST(OpsForward, SoftmaxAlongEachAxis) {
  const Tensor x = tensor({{1, 2, 3}, {1, 4, 9}});
  const double e = std::numbers::e;
  // Axis 1 normalises each row of three.
  const double z0 = e + e * e + std::exp(3.0), z1 = e + std::exp(4.0) + std::exp(9.0);
  const Tensor r = softmax(x, 1);
  expect_close(
      r, {2, 3},
      {e / z0, e * e / z0, std::exp(3.0) / z0, e / z1, std::exp(4.0) / z1, std::exp(9.0) / z1},
      kF32);
  // Axis 0 normalises each column of two: e^a / (e^a + e^b) = 1 / (1 + e^(b - a)).
  const Tensor c = softmax(x, 0);
  expect_close(c, {2, 3},
               {0.5, 1 / (1 + e * e), 1 / (1 + std::exp(6.0)), 0.5, 1 / (1 + std::exp(-2.0)),
                1 / (1 + std::exp(-6.0))},
               kF32);
  // Rows of the axis-1 result and columns of the axis-0 result sum to 1; the other way round
  // they do not (the row sums of the axis-0 result are 0.62 and 2.38).
  expect_close(sum(r, {1}), {2}, {1, 1}, kF32);
  expect_close(sum(c, {0}), {3}, {1, 1, 1}, kF32);
  EXPECT_GT(std::abs(sum(c, {1}).at({0}) - 1), 0.1);
  EXPECT_GT(std::abs(sum(r, {0}).at({2}) - 1), 0.1);
}

TEST(OpsForward, SoftmaxAlongTheMiddleAxis) {
  // x[i, j, k] = (15i + 5j + k) / 10; along axis 1 the shift by (15i + k) / 10 cancels:
  // y[i, j, k] = e^(j/2) / (1 + e^0.5 + e^1).
  const Tensor x = iota({2, 3, 5}, DType::Float64) * 0.1;
  const Tensor y = softmax(x, 1);
  const double z = 1 + std::exp(0.5) + std::exp(1.0);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 5}));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 5; ++k) EXPECT_NEAR(y.at({i, j, k}), std::exp(0.5 * j) / z, kF64);
}

TEST(OpsForward, SoftmaxOfHugeLogits) {
  // Only differences matter: [1e4, 1e4 - 1, 1e4 - 2] behaves like [0, -1, -2] (all three are
  // exact float32 numbers), and [1e4, 0, -1e4] is one-hot up to e^-1e4 = 0.
  const Tensor x = tensor({{1e4, 1e4 - 1, 1e4 - 2}, {1e4, 0, -1e4}});
  const Tensor y = softmax(x, -1);
  const double z = 1 + std::exp(-1.0) + std::exp(-2.0);
  expect_close(y, {2, 3}, {1 / z, std::exp(-1.0) / z, std::exp(-2.0) / z, 1, 0, 0}, kF32);
  for (double v : y.to_vector()) EXPECT_TRUE(std::isfinite(v));
}

TEST(OpsForward, SoftmaxOfAMaskedRowIsOneHot) {
  // All but one entry -inf: e^0 / e^0 = 1 at the survivor, e^-inf = 0 elsewhere.
  const Tensor x = tensor({{-kInf, 2.5, -kInf}, {-kInf, -kInf, -7}});
  expect_exact(softmax(x, 1), {2, 3}, {0, 1, 0, 0, 0, 1});
  // Along axis 0, column 2 is [-inf, -7] -> [0, 1] and column 1 is [2.5, -inf] -> [1, 0].
  const Tensor c = softmax(x, 0);
  EXPECT_EQ(c.at({0, 1}), 1);
  EXPECT_EQ(c.at({1, 1}), 0);
  EXPECT_EQ(c.at({0, 2}), 0);
  EXPECT_EQ(c.at({1, 2}), 1);
}

TEST(OpsForward, SoftmaxOfAFullyMaskedRowIsZeroWithZeroGradient) {
  Tensor x = tensor({{1, 2, 3}, {-kInf, -kInf, -kInf}}, DType::Float64).set_requires_grad();
  const Tensor y = softmax(x, 1);
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  const double p[3] = {std::exp(1.0) / z, std::exp(2.0) / z, std::exp(3.0) / z};
  expect_close(y, {2, 3}, {p[0], p[1], p[2], 0, 0, 0}, kF64);

  // Backward with g: dx = y * (g - sum(g * y)) on row 0, exactly 0 on the masked row.
  y.backward(tensor({{1, 2, 3}, {4, 5, 6}}, DType::Float64));
  const double dot = 1 * p[0] + 2 * p[1] + 3 * p[2];
  const std::vector<double> g = x.grad().to_vector();
  EXPECT_NEAR(g[0], p[0] * (1 - dot), kF64);
  EXPECT_NEAR(g[1], p[1] * (2 - dot), kF64);
  EXPECT_NEAR(g[2], p[2] * (3 - dot), kF64);
  EXPECT_EQ(g[3], 0);
  EXPECT_EQ(g[4], 0);
  EXPECT_EQ(g[5], 0);
}

TEST(OpsForward, LogSoftmax) {
  // log_softmax(x) = x - log(sum e^x), along either axis.
  const Tensor x = tensor({{1, 2, 3}, {1, 4, 9}}, DType::Float64);
  const double l0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  const double l1 = std::log(std::exp(1.0) + std::exp(4.0) + std::exp(9.0));
  expect_close(log_softmax(x, 1), {2, 3}, {1 - l0, 2 - l0, 3 - l0, 1 - l1, 4 - l1, 9 - l1}, kF64);
  // Axis 0, column 1: [2, 4] -> 2 - log(e^2 + e^4) and 4 - log(e^2 + e^4).
  const Tensor c = log_softmax(x, 0);
  const double lc = std::log(std::exp(2.0) + std::exp(4.0));
  EXPECT_NEAR(c.at({0, 1}), 2 - lc, kF64);
  EXPECT_NEAR(c.at({1, 1}), 4 - lc, kF64);
  EXPECT_NEAR(c.at({0, 0}), -std::numbers::ln2, kF64);  // a column [1, 1]
}

TEST(OpsForward, LogSoftmaxOfHugeLogitsFloat64) {
  // [1e4, 1e4 - 1, 1e4 - 2] - 1e4 - log(1 + e^-1 + e^-2). The inputs are near 1e4, where one
  // float64 ulp is 1.8e-12, so the outputs carry an absolute error of that order.
  const Tensor x = tensor({1e4, 1e4 - 1, 1e4 - 2}, DType::Float64);
  const double lz = std::log(1 + std::exp(-1.0) + std::exp(-2.0));
  const Tensor y = log_softmax(x, 0);
  ASSERT_EQ(y.shape(), Shape{3});
  EXPECT_NEAR(y.at({0}), -lz, 1e-11);
  EXPECT_NEAR(y.at({1}), -1 - lz, 1e-11);
  EXPECT_NEAR(y.at({2}), -2 - lz, 1e-11);
}

TEST(OpsForward, LogSoftmaxOfHugeLogitsFloat32IsFinite) {
  const Tensor y = log_softmax(tensor({{1e4, 0, -1e4}, {1e4, 1e4 - 1, 1e4 - 2}}), 1);
  for (double v : y.to_vector()) EXPECT_TRUE(std::isfinite(v));
  // Row 0: e^-1e4 vanishes next to 1, so the outputs are [0, -1e4, -2e4] exactly.
  EXPECT_EQ(y.at({0, 0}), 0);
  EXPECT_EQ(y.at({0, 1}), -1e4);
  EXPECT_EQ(y.at({0, 2}), -2e4);
}

// Shifting the logits by a constant must not change log_softmax beyond float32 rounding of the
// O(1) result. The kernel computes x - (max + log(sum)), so the shift is rounded at the
// magnitude of 1e4 (float32 ulp 2^-10): the first output is -0.4072266 instead of -0.4076060,
// an error of 3.8e-4. Computing (x - max) - log(sum) keeps it exact; cross_entropy shares the
// kernel and inherits the error.
TEST(OpsForward, LogSoftmaxOfHugeLogitsFloat32IsAccurate) {
  const double lz = std::log(1 + std::exp(-1.0) + std::exp(-2.0));  // 0.40760596
  expect_close(log_softmax(tensor({1e4, 1e4 - 1, 1e4 - 2}), 0), {3}, {-lz, -1 - lz, -2 - lz}, kF32);
  EXPECT_NEAR(cross_entropy(tensor({{1e4, 1e4 - 1, 1e4 - 2}}), Indices({1}, {0})).item(), lz, kF32);
}

TEST(OpsForward, LogSoftmaxOfAFullyMaskedRowHasZeroGradient) {
  Tensor x = tensor({{-kInf, -kInf, -kInf}, {0, 0, 0}}, DType::Float64).set_requires_grad();
  const Tensor y = log_softmax(x, 1);
  // Row 1 is uniform: log(1/3).
  EXPECT_NEAR(y.at({1, 2}), -std::log(3.0), kF64);
  y.backward(tensor({{1, 2, 3}, {1, 2, 3}}, DType::Float64));
  // Row 0 is masked: zero gradient. Row 1: g - softmax * sum(g) = g - 6/3 = [-1, 0, 1].
  expect_close(x.grad(), {2, 3}, {0, 0, 0, -1, 0, 1}, kF64);
  for (double v : x.grad().to_vector()) EXPECT_FALSE(std::isnan(v));
}

// --- cross_entropy ----------------------------------------------------------------------------

TEST(OpsForward, CrossEntropyWithIgnoreIndex) {
  const Tensor logits = tensor({{1, 2, 3}, {0, 0, 0}});
  // Row 0, target 2: -log(e^3 / (e + e^2 + e^3)) = log(e + e^2 + e^3) - 3.
  const double loss0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3;  // 0.4076
  // Row 1 is uniform over 3 classes: log 3 for any target.
  const double loss1 = std::log(3.0);

  // Both counted: the mean of the two.
  EXPECT_NEAR(cross_entropy(logits, Indices({2}, {2, 1})).item(), (loss0 + loss1) / 2, kF32);
  // Row 1 ignored (default ignore_index -100): the mean over the one counted row.
  EXPECT_NEAR(cross_entropy(logits, Indices({2}, {2, -100})).item(), loss0, kF32);
  // A custom ignore_index that is also a valid class: row 0 (target 0) is left out.
  EXPECT_NEAR(cross_entropy(logits, Indices({2}, {0, 1}), 0).item(), loss1, kF32);
}

TEST(OpsForward, CrossEntropyDividesByTheCountedRows) {
  // Row 0 = [0, log 3]: softmax [1/4, 3/4], target 1 -> log(4/3).
  // Row 1 is ignored.
  // Row 2 = [log 7, 0]: softmax [7/8, 1/8], target 0 -> log(8/7).
  Tensor logits =
      tensor({{0, std::log(3.0)}, {5, -5}, {std::log(7.0), 0}}, DType::Float64).set_requires_grad();
  const Tensor loss = cross_entropy(logits, Indices({3}, {1, -100, 0}));
  EXPECT_NEAR(loss.item(), (std::log(4.0 / 3) + std::log(8.0 / 7)) / 2, kF64);
  loss.backward();
  // (softmax - onehot) / 2 on counted rows, 0 on the ignored one:
  // row 0: [1/4, 3/4 - 1] / 2 = [0.125, -0.125]; row 2: [7/8 - 1, 1/8] / 2 = [-0.0625, 0.0625].
  expect_close(logits.grad(), {3, 2}, {0.125, -0.125, 0, 0, -0.0625, 0.0625}, kF64);
}

TEST(OpsForward, CrossEntropyOverBatchAxes) {
  // logits [2, 3, 5], targets [2, 3] flattened to rows r = 0..5 with target r % 5. Even rows
  // have logit log 4 at the target and 0 elsewhere: p = 4 / (4 + 4) -> loss log 2. Odd rows
  // are all 0: p = 1/5 -> loss log 5. Row 4 is ignored, leaving rows 0, 1, 2, 3, 5:
  // (2 log 2 + 3 log 5) / 5.
  std::vector<double> v(30, 0.0);
  std::vector<int64_t> targets;
  for (int64_t r = 0; r < 6; ++r) {
    targets.push_back(r == 4 ? -100 : r % 5);
    if (r % 2 == 0) v[r * 5 + r % 5] = std::log(4.0);
  }
  const Tensor logits = Tensor::from_vector(v, {2, 3, 5}, DType::Float64);
  const double want = (2 * std::log(2.0) + 3 * std::log(5.0)) / 5;
  EXPECT_NEAR(cross_entropy(logits, Indices({2, 3}, targets)).item(), want, kF64);
}

TEST(OpsForward, CrossEntropyWithEveryTargetIgnored) {
  Tensor logits = tensor({{1, 2, 3}, {4, 5, 6}}, DType::Float64).set_requires_grad();
  const Tensor loss = cross_entropy(logits, Indices({2}, {-100, -100}));
  EXPECT_EQ(loss.shape(), Shape{});
  EXPECT_EQ(loss.item(), 0);
  loss.backward();
  expect_exact(logits.grad(), {2, 3}, {0, 0, 0, 0, 0, 0});
}

// --- layer_norm ---------------------------------------------------------------------------

TEST(OpsForward, LayerNormWithoutAffine) {
  const std::vector<double> v = {1, 2, 3, 4, 5, 10, 0, -10, 5, 5, 2, 2, 2, 2, 3};
  const double eps = 1e-5;
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const Tensor x = Tensor::from_vector(v, {3, 5}, dtype);
    const Tensor y = layer_norm(x, Tensor(), Tensor(), eps);
    ASSERT_EQ(y.shape(), (Shape{3, 5}));
    for (int64_t r = 0; r < 3; ++r) {
      // Biased statistics of the row: m = mean, var = mean((x - m)^2).
      double m = 0, var = 0;
      for (int64_t c = 0; c < 5; ++c) m += v[r * 5 + c] / 5;
      for (int64_t c = 0; c < 5; ++c) var += (v[r * 5 + c] - m) * (v[r * 5 + c] - m) / 5;
      double ym = 0, yvar = 0;
      for (int64_t c = 0; c < 5; ++c) {
        const double want = (v[r * 5 + c] - m) / std::sqrt(var + eps);
        EXPECT_NEAR(y.at({r, c}), want, dtype == DType::Float32 ? kF32 * 4 : kF64)
            << "row " << r << " column " << c;
        ym += y.at({r, c}) / 5;
      }
      for (int64_t c = 0; c < 5; ++c) yvar += (y.at({r, c}) - ym) * (y.at({r, c}) - ym) / 5;
      // Each row has mean 0 and variance var / (var + eps), within 1e-5 of 1 for these rows.
      EXPECT_NEAR(ym, 0, dtype == DType::Float32 ? 1e-6 : kF64);
      EXPECT_NEAR(yvar, var / (var + eps), dtype == DType::Float32 ? 1e-6 : kF64);
    }
  }
  // Row 0 by hand: m = 3, var = (4 + 1 + 0 + 1 + 4) / 5 = 2, so y[0, 4] = 2 / sqrt(2 + 1e-5).
  const Tensor y = layer_norm(Tensor::from_vector(v, {3, 5}, DType::Float64), Tensor(), Tensor());
  EXPECT_NEAR(y.at({0, 4}), 2 / std::sqrt(2 + 1e-5), kF64);
}

TEST(OpsForward, LayerNormAppliesWeightAndBias) {
  // Row {1, 2, 3, 4, 5}: normalised n = (x - 3) / sqrt(2 + eps), then n * w + b.
  const Tensor x = tensor({{1, 2, 3, 4, 5}, {5, 4, 3, 2, 1}}, DType::Float64);
  const Tensor w = tensor({1, 2, 3, 4, 5}, DType::Float64);
  const Tensor b = tensor({0.5, -1, 0, 1, 2}, DType::Float64);
  const double s = 1 / std::sqrt(2 + 1e-5);
  const std::vector<double> n0 = {-2 * s, -s, 0, s, 2 * s};
  std::vector<double> affine, scaled, shifted;
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t c = 0; c < 5; ++c) {
      const double n = r == 0 ? n0[c] : -n0[c];  // row 1 is row 0 reversed
      const double wc = c + 1.0, bc = b.at({c});
      affine.push_back(n * wc + bc);
      scaled.push_back(n * wc);
      shifted.push_back(n + bc);
    }
  }
  expect_close(layer_norm(x, w, b), {2, 5}, affine, kF64);
  expect_close(layer_norm(x, w, Tensor()), {2, 5}, scaled, kF64);
  expect_close(layer_norm(x, Tensor(), b), {2, 5}, shifted, kF64);
}

TEST(OpsForward, LayerNormNormalisesOnlyTheLastAxis) {
  // [2, 3, 5]: every [i, j, :] is 0..4 shifted by 15i + 5j, so every row normalises to the
  // same values (k - 2) / sqrt(2 + eps).
  const Tensor y = layer_norm(iota({2, 3, 5}, DType::Float64), Tensor(), Tensor());
  ASSERT_EQ(y.shape(), (Shape{2, 3, 5}));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 5; ++k)
        EXPECT_NEAR(y.at({i, j, k}), (k - 2) / std::sqrt(2 + 1e-5), kF64);
}

// --- Embedding, masked_fill and where ---------------------------------------------------------

TEST(OpsForward, EmbeddingRowsAndScatterAddGradient) {
  // weight [7, 5] with weight[v, c] = 5v + c; ids [2, 3] with id 4 three times.
  Tensor weight = iota({7, 5}, DType::Float64).set_requires_grad();
  const Indices ids({2, 3}, {4, 0, 4, 1, 2, 4});
  const Tensor out = embedding(weight, ids);
  ASSERT_EQ(out.shape(), (Shape{2, 3, 5}));
  for (int64_t p = 0; p < 6; ++p)
    for (int64_t c = 0; c < 5; ++c) EXPECT_EQ(out.at({p / 3, p % 3, c}), 5 * ids.values[p] + c);

  // Backward with g[p, c] = 5p + c: row v of the gradient is the sum of g over positions with
  // id v. Id 4 sits at positions 0, 2, 5: (0 + c) + (10 + c) + (25 + c) = 35 + 3c.
  out.backward(iota({2, 3, 5}, DType::Float64));
  const Tensor g = weight.grad();
  ASSERT_EQ(g.shape(), (Shape{7, 5}));
  for (int64_t c = 0; c < 5; ++c) {
    EXPECT_EQ(g.at({4, c}), 35 + 3 * c);
    EXPECT_EQ(g.at({0, c}), 5 + c);   // position 1
    EXPECT_EQ(g.at({1, c}), 15 + c);  // position 3
    EXPECT_EQ(g.at({2, c}), 20 + c);  // position 4
    EXPECT_EQ(g.at({3, c}), 0);       // unused rows get zero
    EXPECT_EQ(g.at({5, c}), 0);
    EXPECT_EQ(g.at({6, c}), 0);
  }
}

TEST(OpsForward, MaskedFillWithBroadcastMasks) {
  const Tensor x = tensor({{1, 2, 3}, {4, 5, 6}});
  // A [3] mask selects columns 0 and 2 in every row.
  expect_exact(masked_fill(x, Mask({3}, {1, 0, 1}), -7), {2, 3}, {-7, 2, -7, -7, 5, -7});
  // A [2, 1] mask selects all of row 1.
  expect_exact(masked_fill(x, Mask({2, 1}, {0, 1}), -7), {2, 3}, {1, 2, 3, -7, -7, -7});
  // A full mask, filling with -inf (attention masking).
  const Tensor f = masked_fill(x, Mask({2, 3}, {0, 1, 0, 0, 0, 1}), -kInf);
  expect_exact(f, {2, 3}, {1, -kInf, 3, 4, 5, -kInf});
  // The filled positions get no gradient.
  Tensor xg = tensor({{1, 2, 3}, {4, 5, 6}}, DType::Float64).set_requires_grad();
  sum(masked_fill(xg, Mask({3}, {1, 0, 1}), 0.5) * 2.0).backward();
  expect_exact(xg.grad(), {2, 3}, {0, 2, 0, 0, 2, 0});
}

TEST(OpsForward, WhereWithBroadcasting) {
  const Tensor a = tensor({10, 20, 30});            // [3]
  const Tensor b = tensor({{1, 2, 3}, {4, 5, 6}});  // [2, 3]
  // A [2, 1] mask picks a for row 0 and b for row 1.
  expect_exact(where(Mask({2, 1}, {1, 0}), a, b), {2, 3}, {10, 20, 30, 4, 5, 6});
  // A [1, 3] mask with a rank-0 b.
  expect_exact(where(Mask({1, 3}, {0, 1, 1}), b, Tensor::scalar(-1)), {2, 3}, {-1, 2, 3, -1, 5, 6});
  // The mask alone may set the output shape: [2, 3] from two scalars.
  expect_exact(where(Mask({2, 3}, {1, 0, 0, 0, 1, 1}), Tensor::scalar(1), Tensor::scalar(0)),
               {2, 3}, {1, 0, 0, 0, 1, 1});
}

TEST(OpsForward, WhereGradientIsSummedOverBroadcastAxes) {
  Tensor a = tensor({10, 20, 30}, DType::Float64).set_requires_grad();
  Tensor b = tensor({{1, 2, 3}, {4, 5, 6}}, DType::Float64).set_requires_grad();
  sum(where(Mask({2, 3}, {1, 0, 1, 1, 1, 0}), a, b)).backward();
  // a[j] gets one per row where mask[:, j] is set: column counts [2, 1, 1].
  expect_exact(a.grad(), {3}, {2, 1, 1});
  // b gets the complement of the mask.
  expect_exact(b.grad(), {2, 3}, {0, 1, 0, 0, 0, 1});
}

// --- dropout --------------------------------------------------------------------------------

TEST(OpsForward, DropoutInEvaluationOrWithZeroProbability) {
  Generator gen(1);
  const Tensor x = tensor({{1, 2, 3}, {4, 5, 6}});
  const auto state = gen.state();
  const Tensor eval = dropout(x, 0.5, false, gen);
  expect_exact(eval, {2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor p0 = dropout(x, 0.0, true, gen);
  expect_exact(p0, {2, 3}, {1, 2, 3, 4, 5, 6});
  // Neither draws from the generator, so evaluation does not shift later random streams.
  EXPECT_EQ(gen.state(), state);
}

TEST(OpsForward, DropoutTrainingZeroesAboutHalfAndScalesTheRest) {
  constexpr int64_t n = 100000;
  Generator init(3);
  // Values in [1, 2): never zero, so a zero in the output can only come from the mask.
  const Tensor x = Tensor::uniform({n}, init, 1.0, 2.0);
  Generator gen(11);
  const Tensor y = dropout(x, 0.5, true, gen);
  ASSERT_EQ(y.shape(), Shape{n});
  const std::vector<double> xv = x.to_vector(), yv = y.to_vector();
  int64_t zeros = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (yv[i] == 0) {
      ++zeros;
    } else {
      EXPECT_EQ(yv[i], 2 * xv[i]) << "at " << i;  // kept values are scaled by 1 / (1 - 0.5)
    }
  }
  // Binomial(100000, 0.5): mean 50000, standard deviation sqrt(n / 4) = 158; five of them.
  EXPECT_NEAR(static_cast<double>(zeros), 50000, 5 * 158);

  // The same seed gives the same mask; another seed a different one.
  Generator same(11), other(12);
  EXPECT_EQ(dropout(x, 0.5, true, same).to_vector(), yv);
  EXPECT_NE(dropout(x, 0.5, true, other).to_vector(), yv);
}

TEST(OpsForward, DropoutKeepProbabilityAndGradient) {
  constexpr int64_t n = 100000;
  Generator gen(5);
  Tensor x = Tensor::ones({n}, DType::Float64).set_requires_grad();
  const Tensor y = dropout(x, 0.25, true, gen);
  const std::vector<double> yv = y.to_vector();
  int64_t zeros = 0;
  for (double v : yv) {
    if (v == 0) {
      ++zeros;
    } else {
      EXPECT_DOUBLE_EQ(v, 4.0 / 3.0);  // 1 / (1 - 0.25)
    }
  }
  // Binomial(100000, 0.25): mean 25000, standard deviation sqrt(n * 3/16) = 137.
  EXPECT_NEAR(static_cast<double>(zeros), 25000, 5 * 137);
  // The gradient is the same scaled mask: 0 where dropped, 4/3 where kept.
  sum(y).backward();
  const std::vector<double> g = x.grad().to_vector();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(g[i], yv[i]) << "at " << i;
}

// --- float64 end to end --------------------------------------------------------------------

TEST(OpsForward, Float64ArithmeticKeepsDoublePrecision) {
  // 0.1 + 0.2 in float64 is the double sum, not a float32 one.
  const Tensor s = tensor({0.1}, DType::Float64) + tensor({0.2}, DType::Float64);
  EXPECT_EQ(s.dtype(), DType::Float64);
  EXPECT_EQ(s.item(), 0.1 + 0.2);
  // 1/3 keeps 53 bits.
  EXPECT_EQ((1.0 / Tensor::scalar(3, DType::Float64)).item(), 1.0 / 3.0);
  EXPECT_EQ(exp(Tensor::scalar(1, DType::Float64)).item(), std::exp(1.0));
  EXPECT_EQ(sqrt(Tensor::scalar(2, DType::Float64)).item(), std::sqrt(2.0));
  // Results keep the dtype through reductions and shape ops.
  EXPECT_EQ(mean(transpose(iota({2, 3}, DType::Float64), 0, 1), {0}).dtype(), DType::Float64);
}

}  // namespace test_ops_forward
}  // namespace gradlab
