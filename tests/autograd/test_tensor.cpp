// Tensor basics: factories, seeded random draws, element access, dtype conversion, copies,
// allclose, printing, and tensors of rank 0 and rank 6. Expected values are worked out by hand
// in the comments next to each assertion.
#include <gtest/gtest.h>

#include "tests/test_helpers.h"

#include <cmath>
#include <limits>
#include <numbers>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/ops.h"

namespace gradlab {
namespace test_tensor {

using testing::expect_exact;

std::string printed(const Tensor& t) {
  std::ostringstream out;
  out << t;
  return out.str();
}

using testing::contains;

// --- Factories -------------------------------------------------------------------------------

TEST(TensorFactory, ZerosOnesFull) {
  const Tensor z = Tensor::zeros({2, 3});
  EXPECT_EQ(z.dtype(), DType::Float32);  // the default dtype
  EXPECT_EQ(z.rank(), 2);
  EXPECT_EQ(z.numel(), 6);
  expect_exact(z, {2, 3}, {0, 0, 0, 0, 0, 0});

  const Tensor o = Tensor::ones({3, 2}, DType::Float64);
  EXPECT_EQ(o.dtype(), DType::Float64);
  expect_exact(o, {3, 2}, {1, 1, 1, 1, 1, 1});

  const Tensor f = Tensor::full({5}, -2.5);
  expect_exact(f, {5}, {-2.5, -2.5, -2.5, -2.5, -2.5});

  // full stores the value rounded to the dtype: 0.1 is not a float32 number.
  EXPECT_EQ(Tensor::full({1}, 0.1).item(), static_cast<double>(0.1f));
  EXPECT_EQ(Tensor::full({1}, 0.1, DType::Float64).item(), 0.1);

  // A zero-size axis gives an empty tensor.
  EXPECT_EQ(Tensor::zeros({2, 0, 3}).numel(), 0);
}

TEST(TensorFactory, SizeCountsNegativeAxesFromTheEnd) {
  const Tensor t = Tensor::zeros({2, 3, 5});
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.size(2), 5);
  EXPECT_EQ(t.size(-1), 5);
  EXPECT_EQ(t.size(-3), 2);
}

TEST(TensorFactory, ScalarHasRankZero) {
  const Tensor s = Tensor::scalar(3.5, DType::Float64);
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.numel(), 1);  // the empty product
  EXPECT_EQ(s.item(), 3.5);
  EXPECT_EQ(s.at({}), 3.5);
}

TEST(TensorFactory, Arange) {
  expect_exact(Tensor::arange(5), {5}, {0, 1, 2, 3, 4});
  const Tensor d = Tensor::arange(7, DType::Float64);
  EXPECT_EQ(d.dtype(), DType::Float64);
  expect_exact(d, {7}, {0, 1, 2, 3, 4, 5, 6});
  EXPECT_EQ(Tensor::arange(0).numel(), 0);
}

TEST(TensorFactory, FromVectorIsRowMajor) {
  const Tensor t = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(t.dtype(), DType::Float32);
  // Row-major: element [i, j] is value number 3 * i + j.
  EXPECT_EQ(t.at({0, 2}), 3);
  EXPECT_EQ(t.at({1, 0}), 4);
  EXPECT_EQ(t.at({1, 2}), 6);

  const Tensor d = Tensor::from_vector(std::vector<double>{0.1, 0.2}, {2}, DType::Float64);
  EXPECT_EQ(d.dtype(), DType::Float64);
  EXPECT_EQ(d.at({0}), 0.1);  // float64 keeps the double exactly
  EXPECT_EQ(d.at({1}), 0.2);

  const Tensor f = Tensor::from_vector(std::vector<float>{1.5f, -2.0f, 0.25f}, {3, 1});
  EXPECT_EQ(f.dtype(), DType::Float32);
  expect_exact(f, {3, 1}, {1.5, -2.0, 0.25});
}

TEST(TensorFactory, FromVectorRejectsAWrongCount) {
  EXPECT_THROW(Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5}, {2, 3}), ShapeError);
  EXPECT_THROW(Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6, 7}, {2, 3}), ShapeError);
}

TEST(TensorFactory, NestedLists) {
  const Tensor v = tensor({1, 2, 3});
  expect_exact(v, {3}, {1, 2, 3});

  const Tensor m = tensor({{1, 2, 3}, {4, 5, 6}});
  expect_exact(m, {2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(m.at({1, 0}), 4);

  // Shape [2, 3, 2]; strides [6, 2, 1], so [1, 2, 0] is value number 6 + 4 = 10 -> 11.
  const Tensor c = tensor({{{1, 2}, {3, 4}, {5, 6}}, {{7, 8}, {9, 10}, {11, 12}}}, DType::Float64);
  EXPECT_EQ(c.dtype(), DType::Float64);
  expect_exact(c, {2, 3, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  EXPECT_EQ(c.at({1, 2, 0}), 11);

  // Shape [1, 2, 3, 2].
  const Tensor q = tensor({{{{1, 2}, {3, 4}, {5, 6}}, {{7, 8}, {9, 10}, {11, 12}}}});
  ASSERT_EQ(q.shape(), (Shape{1, 2, 3, 2}));
  // Row-major strides are [12, 6, 2, 1]: [0, 1, 2, 1] is value number 6 + 4 + 1 = 11 -> 12.
  EXPECT_EQ(q.at({0, 1, 2, 1}), 12);
  EXPECT_EQ(q.at({0, 0, 1, 0}), 3);
}

TEST(TensorFactory, RaggedNestedListThrows) {
  EXPECT_THROW(tensor({{1, 2, 3}, {4, 5}}), ShapeError);
  EXPECT_THROW(tensor({{1, 2}, {3, 4}, {5, 6, 7}}), ShapeError);
  // Ragged only at the innermost depth.
  EXPECT_THROW(tensor({{{1, 2}, {3, 4}}, {{5, 6}, {7}}}), ShapeError);
  try {
    tensor({{1, 2, 3}, {4, 5}});
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(contains(e.what(), "ragged")) << e.what();
  }
}

TEST(TensorFactory, NegativeSizeThrows) {
  EXPECT_THROW(Tensor::zeros({2, -3}), ShapeError);
}

// --- Random draws ----------------------------------------------------------------------------

TEST(TensorRandom, SameSeedGivesSameValues) {
  Generator a(42), b(42);
  const Tensor x = Tensor::randn({3, 5}, a);
  const Tensor y = Tensor::randn({3, 5}, b);
  EXPECT_EQ(x.to_vector(), y.to_vector());

  Generator c(7), d(7);
  const Tensor u = Tensor::uniform({2, 7}, c, -1.0, 3.0, DType::Float64);
  const Tensor v = Tensor::uniform({2, 7}, d, -1.0, 3.0, DType::Float64);
  EXPECT_EQ(u.to_vector(), v.to_vector());
}

TEST(TensorRandom, DifferentSeedsGiveDifferentValues) {
  Generator a(42), b(43);
  const std::vector<double> x = Tensor::randn({3, 5}, a, DType::Float64).to_vector();
  const std::vector<double> y = Tensor::randn({3, 5}, b, DType::Float64).to_vector();
  // Continuous draws from independent streams: no two should coincide.
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NE(x[i], y[i]) << "at " << i;

  // Consecutive draws from one generator differ too (the stream advances).
  Generator g(5);
  const Tensor first = Tensor::uniform({7}, g, 0, 1);
  const Tensor second = Tensor::uniform({7}, g, 0, 1);
  EXPECT_NE(first.to_vector(), second.to_vector());
}

TEST(TensorRandom, StateReplaysTheStream) {
  Generator g(123);
  Tensor::randn({5}, g);  // advance past the seed state
  const std::array<uint64_t, 4> saved = g.state();
  const std::vector<double> first = Tensor::randn({2, 3}, g, DType::Float64).to_vector();
  const std::vector<double> next = Tensor::uniform({3}, g, 0, 1, DType::Float64).to_vector();

  g.set_state(saved);
  EXPECT_EQ(Tensor::randn({2, 3}, g, DType::Float64).to_vector(), first);
  EXPECT_EQ(Tensor::uniform({3}, g, 0, 1, DType::Float64).to_vector(), next);

  // A fresh generator given the saved state continues identically.
  Generator other(999);
  other.set_state(saved);
  EXPECT_EQ(Tensor::randn({2, 3}, other, DType::Float64).to_vector(), first);
}

TEST(TensorRandom, NormalMomentsOf100kDraws) {
  constexpr int64_t n = 100000;
  Generator g(2024);
  const std::vector<double> v = Tensor::randn({n}, g, DType::Float64).to_vector();
  double s = 0, s2 = 0;
  for (double x : v) s += x;
  const double m = s / n;
  for (double x : v) s2 += (x - m) * (x - m);
  const double sd = std::sqrt(s2 / (n - 1));
  // Standard error of the mean is 1/sqrt(n) = 0.00316; of the standard deviation about
  // 1/sqrt(2n) = 0.00224. Five standard errors leave a false-failure rate below 1e-6.
  EXPECT_NEAR(m, 0.0, 5 * 0.00316);
  EXPECT_NEAR(sd, 1.0, 5 * 0.00224);
}

TEST(TensorRandom, NormalWithMeanAndStddev) {
  constexpr int64_t n = 100000;
  Generator g(17);
  const std::vector<double> v = Tensor::randn({n}, g, DType::Float64, 3.0, 2.0).to_vector();
  double s = 0, s2 = 0;
  for (double x : v) s += x;
  const double m = s / n;
  for (double x : v) s2 += (x - m) * (x - m);
  const double sd = std::sqrt(s2 / (n - 1));
  // Standard errors scale with sigma = 2: 2/sqrt(n) = 0.00632 and 2/sqrt(2n) = 0.00447.
  EXPECT_NEAR(m, 3.0, 5 * 0.00632);
  EXPECT_NEAR(sd, 2.0, 5 * 0.00447);
}

TEST(TensorRandom, UniformRangeAndMean) {
  constexpr int64_t n = 100000;
  Generator g(3);
  const std::vector<double> v = Tensor::uniform({n}, g, -1.0, 3.0, DType::Float64).to_vector();
  double s = 0;
  for (double x : v) {
    EXPECT_GE(x, -1.0);
    EXPECT_LT(x, 3.0);
    s += x;
  }
  // Uniform on [-1, 3): mean 1, variance 4^2 / 12 = 4/3, standard error sqrt(4/3 / n) = 0.00365.
  EXPECT_NEAR(s / n, 1.0, 5 * 0.00365);
}

// --- Element access ----------------------------------------------------------------------------

TEST(TensorAccess, Item) {
  EXPECT_EQ(Tensor::scalar(-4.25).item(), -4.25);
  // Any one-element tensor has an item, whatever its rank.
  EXPECT_EQ(Tensor::full({1, 1}, 7.5).item(), 7.5);
  EXPECT_EQ(Tensor::full({1, 1, 1}, 2.0, DType::Float64).item(), 2.0);
  EXPECT_THROW(tensor({1, 2}).item(), ShapeError);
}

TEST(TensorAccess, AtUsesRowMajorOffsets) {
  std::vector<double> values(30);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i);
  const Tensor t = Tensor::from_vector(values, {2, 3, 5});
  // Strides of [2, 3, 5] are [15, 5, 1].
  EXPECT_EQ(t.at({0, 0, 0}), 0);
  EXPECT_EQ(t.at({0, 0, 4}), 4);
  EXPECT_EQ(t.at({0, 2, 0}), 10);
  EXPECT_EQ(t.at({1, 0, 0}), 15);
  EXPECT_EQ(t.at({1, 2, 4}), 15 + 10 + 4);
  EXPECT_THROW(t.at({1, 2}), ShapeError);      // wrong rank
  EXPECT_THROW(t.at({1, 3, 0}), ShapeError);   // 3 is outside axis 1 of size 3
  EXPECT_THROW(t.at({0, 0, -1}), ShapeError);  // no negative indices
}

TEST(TensorAccess, DataOfTheMatchingType) {
  Tensor t = tensor({{1, 2, 3}, {4, 5, 6}});
  float* p = t.mutable_data<float>();
  p[4] = 50;  // flat index 4 is [1, 1]
  EXPECT_EQ(t.at({1, 1}), 50);
  Tensor d = Tensor::zeros({2}, DType::Float64);
  d.mutable_data<double>()[1] = 0.1;
  EXPECT_EQ(d.at({1}), 0.1);
}

// --- Conversion and copies ---------------------------------------------------------------------

TEST(TensorConvert, Float32ToFloat64AndBack) {
  const Tensor f = tensor({0.1, -2.5, 3.0});
  const Tensor d = f.to(DType::Float64);
  EXPECT_EQ(d.dtype(), DType::Float64);
  EXPECT_EQ(d.shape(), f.shape());
  // Widening is exact: the float64 value is the float32 one, not the decimal 0.1.
  EXPECT_EQ(d.at({0}), static_cast<double>(0.1f));
  EXPECT_NE(d.at({0}), 0.1);
  EXPECT_EQ(d.at({1}), -2.5);

  const Tensor third = Tensor::full({2, 3}, 1.0 / 3.0, DType::Float64);
  const Tensor narrowed = third.to(DType::Float32);
  EXPECT_EQ(narrowed.dtype(), DType::Float32);
  ASSERT_EQ(narrowed.shape(), (Shape{2, 3}));
  // Narrowing rounds to the nearest float.
  EXPECT_EQ(narrowed.at({1, 2}), static_cast<double>(static_cast<float>(1.0 / 3.0)));
  EXPECT_NE(narrowed.at({1, 2}), 1.0 / 3.0);
}

TEST(TensorConvert, ToHasItsOwnStorageAndNoGraph) {
  Tensor x = tensor({1, 2, 3}).set_requires_grad();
  Tensor same_dtype = x.to(DType::Float32);
  EXPECT_FALSE(same_dtype.same(x));
  EXPECT_FALSE(same_dtype.requires_grad());
  same_dtype.mutable_data<float>()[0] = 100;
  EXPECT_EQ(x.at({0}), 1);
}

TEST(TensorConvert, CloneIsIndependent) {
  Tensor x = tensor({{1, 2, 3}, {4, 5, 6}}, DType::Float64).set_requires_grad();
  Tensor c = x.clone();
  EXPECT_EQ(c.dtype(), DType::Float64);
  expect_exact(c, {2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_FALSE(c.requires_grad());
  EXPECT_TRUE(c.is_leaf());

  c.mutable_data<double>()[0] = -1;
  EXPECT_EQ(x.at({0, 0}), 1);  // the original is untouched
  x.mutable_data<double>()[5] = -6;
  EXPECT_EQ(c.at({1, 2}), 6);  // and the clone does not see later writes

  // A clone of an op result carries no graph.
  const Tensor y = x * 2.0;
  EXPECT_STREQ(y.op_name(), "mul_scalar");
  EXPECT_STREQ(y.clone().op_name(), "leaf");
}

TEST(TensorConvert, CopyFromKeepsIdentity) {
  Tensor p = Tensor::zeros({2, 3});
  Tensor alias = p;  // a second handle, as an optimizer would keep
  p.copy_from(tensor({{1, 2, 3}, {4, 5, 6}}));
  EXPECT_TRUE(alias.same(p));
  expect_exact(alias, {2, 3}, {1, 2, 3, 4, 5, 6});

  // The copy does not alias the source.
  Tensor src = Tensor::full({2, 3}, 9.0);
  p.copy_from(src);
  src.mutable_data<float>()[0] = 0;
  EXPECT_EQ(p.at({0, 0}), 9);

  EXPECT_THROW(p.copy_from(Tensor::zeros({3, 2})), ShapeError);
  EXPECT_THROW(p.copy_from(Tensor::zeros({2, 3}, DType::Float64)), DTypeError);
}

// Reads cannot write: data() gives a const pointer on a non-const tensor too, so a write
// through it does not compile, and only mutable_data() hands out a writable one.
static_assert(std::is_same_v<decltype(std::declval<Tensor&>().data<float>()), const float*>);
static_assert(std::is_same_v<decltype(std::declval<Tensor&>().mutable_data<float>()), float*>);

// The version tells a cache of values derived from a tensor whether they may be stale.
TEST(TensorVersion, ChangesWithEveryWayOfWriting) {
  Tensor p = Tensor::zeros({2, 3});
  const Tensor same_storage = reshape(p.detach(), {3, 2});
  uint64_t seen = p.version();
  auto changed = [&] {
    const bool moved = p.version() != seen;
    seen = p.version();
    return moved;
  };

  // Reading changes nothing, through data() (on a non-const tensor too), at(), or an op.
  EXPECT_EQ(p.data<float>()[0], 0);
  EXPECT_EQ(std::as_const(p).data<float>()[0], 0);
  EXPECT_EQ(p.at({1, 2}), 0);
  EXPECT_EQ((p * 2.0).at({0, 0}), 0);
  EXPECT_FALSE(changed());

  // Handing out a writable pointer changes it, before anything is written through it.
  float* writable = p.mutable_data<float>();
  EXPECT_TRUE(changed());
  writable[0] = 1;
  EXPECT_EQ(p.data<float>()[0], 1);
  EXPECT_FALSE(changed());
  p.copy_from(Tensor::ones({2, 3}));
  EXPECT_TRUE(changed());
  Tensor writer = same_storage;
  writer.mutable_data<float>()[1] = 5;  // another handle on the same storage
  EXPECT_TRUE(changed());
  EXPECT_EQ(same_storage.version(), p.version());

  // set_data gives p a buffer whose version no other buffer ever had, even one that takes a
  // freed buffer's place in the pool.
  const uint64_t before = p.version();
  p.set_data(Tensor::zeros({2, 3}, DType::Float64));
  EXPECT_TRUE(changed());
  p.set_data(Tensor::zeros({2, 3}));
  EXPECT_NE(p.version(), before);
}

// --- allclose ----------------------------------------------------------------------------------

TEST(TensorAllclose, EqualAndShapeMismatch) {
  const Tensor a = tensor({{1, 2, 3}, {4, 5, 6}});
  EXPECT_TRUE(allclose(a, a.clone()));
  // Same values in a different shape are not close.
  EXPECT_FALSE(allclose(a, tensor({{1, 2}, {3, 4}, {5, 6}})));
  EXPECT_FALSE(allclose(a, tensor({1, 2, 3, 4, 5, 6})));
}

TEST(TensorAllclose, NaNIsNeverClose) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(allclose(tensor({1, nan}), tensor({1, 2})));
  EXPECT_FALSE(allclose(tensor({1, 2}), tensor({1, nan})));
  EXPECT_FALSE(allclose(tensor({1, nan}), tensor({1, nan})));
}

TEST(TensorAllclose, Infinities) {
  const double inf = std::numeric_limits<double>::infinity();
  // Equal infinities are close; an infinite a is not close to a finite b.
  EXPECT_TRUE(allclose(tensor({inf, -inf}), tensor({inf, -inf})));
  EXPECT_FALSE(allclose(tensor({inf}), tensor({1e30})));
  EXPECT_FALSE(allclose(tensor({-inf, 2}), tensor({-1e30, 2})));
}

// An infinite b makes the tolerance atol + rtol * |b| infinite, so |a - b| <= tolerance holds
// for any a: allclose reports 1 and even -inf as close to +inf. NumPy and PyTorch require
// infinities to match exactly.
TEST(TensorAllclose, InfiniteSecondArgumentOnlyMatchesItself) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(allclose(tensor({-inf}), tensor({inf})));
  EXPECT_FALSE(allclose(tensor({1}), tensor({inf})));
  EXPECT_FALSE(allclose(tensor({0, 1}, DType::Float64), tensor({0, -inf}, DType::Float64)));
}

TEST(TensorAllclose, ToleranceBoundary) {
  // |a - b| <= atol + rtol * |b|, with dyadic values so the boundary is exact.
  const Tensor b = tensor({4.0}, DType::Float64);
  // atol only: |1.5 - 1| = 0.5 <= 0.5 passes; 0.5 + 2^-20 does not.
  EXPECT_TRUE(allclose(tensor({1.5}, DType::Float64), tensor({1.0}, DType::Float64), 0, 0.5));
  EXPECT_FALSE(allclose(tensor({1.5 + std::ldexp(1.0, -20)}, DType::Float64),
                        tensor({1.0}, DType::Float64), 0, 0.5));
  // rtol only, relative to b = 4: 0.25 * 4 = 1, so 5 and 3 pass and 5.5 fails.
  EXPECT_TRUE(allclose(tensor({5.0}, DType::Float64), b, 0.25, 0));
  EXPECT_TRUE(allclose(tensor({3.0}, DType::Float64), b, 0.25, 0));
  EXPECT_FALSE(allclose(tensor({5.5}, DType::Float64), b, 0.25, 0));
  // The tolerance scales with the second argument: |4 - 3| = 1 > 0.25 * 3 = 0.75.
  EXPECT_FALSE(allclose(b, tensor({3.0}, DType::Float64), 0.25, 0));
  // Default tolerances: 1e-8 + 1e-5 * 1 around 1.
  EXPECT_TRUE(allclose(tensor({1.0 + 9e-6}, DType::Float64), tensor({1.0}, DType::Float64)));
  EXPECT_FALSE(allclose(tensor({1.0 + 2e-5}, DType::Float64), tensor({1.0}, DType::Float64)));
}

TEST(TensorAllclose, ComparesAcrossDtypes) {
  EXPECT_TRUE(allclose(tensor({0.5, -0.25}), tensor({0.5, -0.25}, DType::Float64)));
  // float32 0.1 differs from float64 0.1 by about 1.5e-9: inside the default atol of 1e-8,
  // outside a zero tolerance.
  EXPECT_TRUE(allclose(tensor({0.1}), tensor({0.1}, DType::Float64)));
  EXPECT_FALSE(allclose(tensor({0.1}), tensor({0.1}, DType::Float64), 0, 0));
}

// --- Printing ----------------------------------------------------------------------------------

TEST(TensorPrint, ShowsShapeDtypeAndValues) {
  const std::string s = printed(tensor({{1, 2, 3}, {4, 5, 6}}));
  EXPECT_TRUE(contains(s, "[2,3]")) << s;
  EXPECT_TRUE(contains(s, "float32")) << s;
  EXPECT_TRUE(contains(s, "[[1, 2, 3], [4, 5, 6]]")) << s;
  EXPECT_FALSE(contains(s, "...")) << s;

  const std::string d = printed(tensor({0.5, -1.25}, DType::Float64));
  EXPECT_TRUE(contains(d, "float64")) << d;
  EXPECT_TRUE(contains(d, "[2]")) << d;
  EXPECT_TRUE(contains(d, "[0.5, -1.25]")) << d;

  const std::string r0 = printed(Tensor::scalar(2.5));
  EXPECT_TRUE(contains(r0, "[]")) << r0;
  EXPECT_TRUE(contains(r0, "2.5")) << r0;

  EXPECT_TRUE(contains(printed(Tensor()), "undefined"));
}

TEST(TensorPrint, ThousandElementsArePrintedInFull) {
  // The summary starts above 1000 elements.
  const std::string s = printed(Tensor::arange(1000));
  EXPECT_FALSE(contains(s, "...")) << s.substr(0, 200);
  EXPECT_TRUE(contains(s, "499, 500, 501")) << s.substr(0, 200);
  EXPECT_TRUE(contains(s, "999]")) << s.substr(0, 200);
}

TEST(TensorPrint, LargeTensorIsAbbreviated) {
  const std::string s = printed(Tensor::arange(2000));
  EXPECT_TRUE(contains(s, "[2000]")) << s;
  EXPECT_TRUE(contains(s, "...")) << s;
  // The first and last three items stay; the middle is left out.
  EXPECT_TRUE(contains(s, "[0, 1, 2")) << s;
  EXPECT_TRUE(contains(s, "1997, 1998, 1999]")) << s;
  EXPECT_FALSE(contains(s, "1000")) << s;
  EXPECT_LT(s.size(), 120u) << s;

  // Both axes of a [7, 200] tensor (1400 elements) are summarised: rows 3 and 800..999 go.
  const std::string m = printed(reshape(Tensor::arange(1400), {7, 200}));
  EXPECT_TRUE(contains(m, "[7,200]")) << m;
  EXPECT_TRUE(contains(m, "1397, 1398, 1399]]")) << m;
  EXPECT_FALSE(contains(m, "600")) << m;  // row 3 starts at 600
}

// The summary should separate its items like NumPy and PyTorch: "[0, 1, 2, ..., 1997, ...]".
// The printer omits the comma before "...", giving "[0, 1, 2..., 1997, 1998, 1999]".
TEST(TensorPrint, AbbreviationKeepsTheSeparatorBeforeTheEllipsis) {
  const std::string s = printed(Tensor::arange(2000));
  EXPECT_TRUE(contains(s, "[0, 1, 2, ..., 1997, 1998, 1999]")) << s;
}

// --- Rank 0 and rank 6 -------------------------------------------------------------------------

TEST(TensorRank, RankZeroInOps) {
  const Tensor s = Tensor::scalar(3.0, DType::Float64).set_requires_grad();
  EXPECT_EQ(sum(s).item(), 3.0);
  EXPECT_EQ(sum(s).shape(), Shape{});
  // A rank-0 tensor broadcasts against anything: 3 * [1, 2] = [3, 6].
  expect_exact(s * tensor({1, 2}, DType::Float64), {2}, {3, 6});
  // d/ds sum(s * [1, 2]) = 1 + 2 = 3, with the gradient reduced back to shape [].
  Tensor y = sum(s * tensor({1, 2}, DType::Float64));
  y.backward();
  ASSERT_TRUE(s.grad().defined());
  EXPECT_EQ(s.grad().shape(), Shape{});
  EXPECT_EQ(s.grad().item(), 3.0);
  // Reshaping a scalar to [1, 1] and back.
  EXPECT_EQ(reshape(s, {1, 1}).shape(), (Shape{1, 1}));
  EXPECT_EQ(reshape(Tensor::full({1, 1}, 5.0), {}).shape(), Shape{});
}

TEST(TensorRank, RankSix) {
  // 210 = 2 * 3 * 5 * 7 values 0..209, reshaped to rank 6 with two unit axes.
  const Tensor x = reshape(Tensor::arange(210, DType::Float64), {1, 2, 3, 1, 5, 7});
  EXPECT_EQ(x.rank(), 6);
  ASSERT_EQ(x.shape(), (Shape{1, 2, 3, 1, 5, 7}));
  // Strides are [210, 105, 35, 35, 7, 1]: [0, 1, 2, 0, 4, 6] -> 105 + 70 + 28 + 6 = 209.
  EXPECT_EQ(x.at({0, 1, 2, 0, 4, 6}), 209);
  EXPECT_EQ(x.at({0, 1, 0, 0, 2, 3}), 105 + 14 + 3);

  // Sum of 0..209 is 209 * 210 / 2 = 21945.
  EXPECT_EQ(sum(x).item(), 21945);
  EXPECT_DOUBLE_EQ(mean(x).item(), 104.5);  // 21945 / 210

  // Sum over axis 4 (size 5) at [0, 1, 2, 0, *, 6]: sum_k (105 + 70 + 7k + 6) = 5 * 181 + 7 * 10.
  const Tensor s4 = sum(x, {4});
  ASSERT_EQ(s4.shape(), (Shape{1, 2, 3, 1, 7}));
  EXPECT_EQ(s4.at({0, 1, 2, 0, 6}), 5 * 181 + 70);

  // Sum over axes 1 and 5 with keepdim: [0, *, 0, 0, 0, *] = sum_i sum_l (105 i + l)
  // = 7 * 105 + 2 * 21 = 777.
  const Tensor s15 = sum(x, {1, -1}, true);
  ASSERT_EQ(s15.shape(), (Shape{1, 1, 3, 1, 5, 1}));
  EXPECT_EQ(s15.at({0, 0, 0, 0, 0, 0}), 777);

  // Gradients flow through rank 6: d sum(x * x) / dx = 2x.
  Tensor p = Tensor::arange(210, DType::Float64).set_requires_grad();
  Tensor r6 = reshape(p, {2, 1, 3, 5, 1, 7});
  sum(r6 * r6).backward();
  ASSERT_EQ(p.grad().shape(), Shape{210});
  EXPECT_EQ(p.grad().at({0}), 0);
  EXPECT_EQ(p.grad().at({209}), 418);

  // A rank-6 permutation: reversing the axes of [1, 2, 3, 1, 5, 7] gives [7, 5, 1, 3, 2, 1] and
  // element [6, 4, 0, 2, 1, 0] of the result is x[0, 1, 2, 0, 4, 6] = 209.
  const Tensor rev = permute(x, {5, 4, 3, 2, 1, 0});
  ASSERT_EQ(rev.shape(), (Shape{7, 5, 1, 3, 2, 1}));
  EXPECT_EQ(rev.at({6, 4, 0, 2, 1, 0}), 209);
  // [3, 2, 0, 1, 0, 0] of the result is x[0, 0, 1, 0, 2, 3] = 35 + 14 + 3.
  EXPECT_EQ(rev.at({3, 2, 0, 1, 0, 0}), 35 + 14 + 3);
}

}  // namespace test_tensor
}  // namespace gradlab
