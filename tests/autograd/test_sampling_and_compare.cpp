// The random draws (bernoulli, rand_like, randn_like): the same seed gives the same values,
// another seed others, and a large draw has the distribution's mean and variance; the
// comparisons' 0/1 values with broadcasting and no graph; where with a tensor condition; and
// the errors naming the op and both shapes.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/ops.h"
#include "tests/test_helpers.h"

namespace gradlab {
namespace test_sampling_and_compare {

using testing::contains;

// 200,000 draws: the standard error of a mean is sd / 447, so 5 standard errors stay below the
// tolerances below for each distribution.
constexpr int64_t kDraws = 200000;

struct Moments {
  double mean = 0, variance = 0;
};

Moments moments_of(const Tensor& t) {
  const std::vector<double> v = t.to_vector();
  Moments m;
  for (double x : v) m.mean += x;
  m.mean /= static_cast<double>(v.size());
  for (double x : v) m.variance += (x - m.mean) * (x - m.mean);
  m.variance /= static_cast<double>(v.size());
  return m;
}

TEST(Sampling, TheSameSeedGivesTheSameDrawsAndAnotherSeedOthers) {
  const Tensor p = Tensor::full({3, 7}, 0.4);
  const Tensor like = Tensor::zeros({3, 7}, DType::Float64);
  const auto draws = [&](uint64_t seed) {
    Generator gen(seed);
    return std::vector<Tensor>{bernoulli(p, gen), rand_like(like, gen, -1.0, 3.0),
                               randn_like(like, gen, 2.0, 0.5)};
  };
  const std::vector<Tensor> a = draws(5), b = draws(5), c = draws(6);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].to_vector(), b[i].to_vector()) << "draw " << i;
    EXPECT_NE(a[i].to_vector(), c[i].to_vector()) << "draw " << i;
    EXPECT_EQ(a[i].shape(), (Shape{3, 7}));
    EXPECT_FALSE(a[i].requires_grad());
  }
  EXPECT_EQ(a[0].dtype(), DType::Float32);
  EXPECT_EQ(a[1].dtype(), DType::Float64);
}

TEST(Sampling, LargeDrawsHaveTheirDistributionsMoments) {
  Generator gen(0);
  const Moments b = moments_of(bernoulli(Tensor::full({kDraws}, 0.3, DType::Float64), gen));
  EXPECT_NEAR(b.mean, 0.3, 0.005);
  EXPECT_NEAR(b.variance, 0.3 * 0.7, 0.005);
  const Tensor like = Tensor::zeros({kDraws}, DType::Float64);
  const Moments u = moments_of(rand_like(like, gen, -1.0, 3.0));
  EXPECT_NEAR(u.mean, 1.0, 0.015);
  EXPECT_NEAR(u.variance, 16.0 / 12.0, 0.015);
  const Moments n = moments_of(randn_like(like, gen, 2.0, 0.5));
  EXPECT_NEAR(n.mean, 2.0, 0.006);
  EXPECT_NEAR(n.variance, 0.25, 0.006);
}

TEST(Sampling, BernoulliFollowsEachElementsProbability) {
  Generator gen(1);
  // Probabilities 0 and 1 are exact; a row of each probability.
  const Tensor p =
      broadcast_to(Tensor::from_vector(std::vector<double>{0.0, 1.0, 0.8}, {3, 1}), {3, 20000});
  const Tensor draws = bernoulli(p, gen);
  const Tensor row_means = mean(draws, {1});
  EXPECT_EQ(row_means.at({0}), 0.0);
  EXPECT_EQ(row_means.at({1}), 1.0);
  EXPECT_NEAR(row_means.at({2}), 0.8, 0.015);
  for (double x : draws.to_vector()) EXPECT_TRUE(x == 0.0 || x == 1.0);
}

TEST(Sampling, BernoulliRefusesAProbabilityOutsideTheUnitInterval) {
  Generator gen(0);
  try {
    bernoulli(tensor({0.5, 1.5}), gen);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "bernoulli: probability 1.5 at position 1 of [2]")) << e.what();
  }
  EXPECT_THROW(bernoulli(tensor({std::nan("")}), gen), ConfigError);
}

TEST(Compare, GivesZeroOrOneWithBroadcasting) {
  const Tensor a = tensor({{1, 2, 3}, {4, 5, 6}});                          // [2, 3]
  const Tensor b = Tensor::from_vector(std::vector<double>{2, 5}, {2, 1});  // [2, 1]
  testing::expect_exact(greater(a, b), {2, 3}, {0, 0, 1, 0, 0, 1});
  testing::expect_exact(greater_equal(a, b), {2, 3}, {0, 1, 1, 0, 1, 1});
  testing::expect_exact(less(a, b), {2, 3}, {1, 0, 0, 1, 0, 0});
  testing::expect_exact(less_equal(a, b), {2, 3}, {1, 1, 0, 1, 1, 0});
  testing::expect_exact(equal(a, b), {2, 3}, {0, 1, 0, 0, 1, 0});
  testing::expect_exact(not_equal(a, b), {2, 3}, {1, 0, 1, 1, 0, 1});
  testing::expect_exact(greater(a, 3.5), {2, 3}, {0, 0, 0, 1, 1, 1});
  testing::expect_exact(less_equal(a, 2.0), {2, 3}, {1, 1, 0, 0, 0, 0});
  testing::expect_exact(equal(a, 6.0), {2, 3}, {0, 0, 0, 0, 0, 1});
  testing::expect_exact(not_equal(a, 1.0), {2, 3}, {0, 1, 1, 1, 1, 1});
  testing::expect_exact(greater_equal(a, 5.0), {2, 3}, {0, 0, 0, 0, 1, 1});
  testing::expect_exact(less(a, 2.0), {2, 3}, {1, 0, 0, 0, 0, 0});
}

TEST(Compare, RecordsNoGraph) {
  Tensor x = tensor({1.0, -2.0}, DType::Float64);
  x.set_requires_grad();
  const Tensor c = greater(x * 2.0, 0.0);
  EXPECT_FALSE(c.requires_grad());
  EXPECT_TRUE(c.is_leaf());
  EXPECT_EQ(c.dtype(), DType::Float64);
}

TEST(Compare, ShapeAndDtypeErrorsNameTheOp) {
  try {
    less(Tensor::zeros({2, 3}), Tensor::zeros({4}));
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(contains(e.what(), "less: shapes cannot be broadcast together: [2,3] and [4]"))
        << e.what();
  }
  try {
    equal(Tensor::zeros({2}), Tensor::zeros({2}, DType::Float64));
    FAIL() << "no error";
  } catch (const DTypeError& e) {
    EXPECT_TRUE(contains(e.what(), "equal: dtype mismatch")) << e.what();
  }
}

TEST(WhereCondition, PicksAWhereNonzeroAndRoutesTheGradient) {
  Tensor a = tensor({{1, 2, 3}, {4, 5, 6}}, DType::Float64);  // [2, 3]
  Tensor b = tensor({-1, -2, -3}, DType::Float64);            // [3]
  a.set_requires_grad();
  b.set_requires_grad();
  const Tensor condition = Tensor::from_vector({1, 0}, {2, 1}, DType::Float64);  // [2, 1]
  const Tensor out = where(condition, a, b);
  testing::expect_exact(out, {2, 3}, {1, 2, 3, -1, -2, -3});
  sum(out * tensor({1, 2, 3}, DType::Float64)).backward();
  testing::expect_exact(a.grad(), {2, 3}, {1, 2, 3, 0, 0, 0});
  testing::expect_exact(b.grad(), {3}, {1, 2, 3});
  // Any nonzero value selects a, as a comparison's 1 does.
  testing::expect_exact(where(tensor({-0.5, 0.0, 2.0}), tensor({1, 1, 1}), tensor({0, 0, 0})), {3},
                        {1, 0, 1});
}

TEST(WhereCondition, AShapeErrorNamesWhereAndBothShapes) {
  try {
    where(Tensor::ones({2, 4}), Tensor::zeros({2, 3}), Tensor::zeros({3}));
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(contains(e.what(), "where: shapes cannot be broadcast together: [2,4] and [2,3]"))
        << e.what();
  }
}

}  // namespace test_sampling_and_compare
}  // namespace gradlab
