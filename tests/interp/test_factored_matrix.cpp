// FactoredMatrix (interp/factored_matrix.h): every quantity against Eigen on the formed product,
// float64, with unequal M, R and N (and R above and below the others), and the shape errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <complex>

#include "autograd/error.h"
#include "autograd/random.h"
#include "interp/factored_matrix.h"
#include "tests/test_helpers.h"

namespace gradlab::interp {
namespace test_factored_matrix {

using testing::contains;

constexpr double kTolerance = 1e-10;

Eigen::MatrixXd random_matrix(int64_t rows, int64_t cols, Generator& gen) {
  Eigen::MatrixXd m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = gen.normal();
  return m;
}

// ||actual - expected|| within kTolerance of ||expected||.
void expect_close(const Eigen::MatrixXd& actual, const Eigen::MatrixXd& expected) {
  ASSERT_EQ(actual.rows(), expected.rows());
  ASSERT_EQ(actual.cols(), expected.cols());
  EXPECT_LE((actual - expected).norm(), kTolerance * expected.norm()) << "actual\n"
                                                                      << actual << "\nexpected\n"
                                                                      << expected;
}

struct Sizes {
  int64_t m, r, n;
};
// R below both, between them, and above both (then the product's rank is min(M, N)).
const Sizes kSizes[] = {{7, 3, 5}, {9, 6, 4}, {5, 8, 6}};

TEST(FactoredMatrix, ProductTransposeAndBA) {
  Generator gen(1);
  for (const Sizes s : kSizes) {
    const FactoredMatrix f(random_matrix(s.m, s.r, gen), random_matrix(s.r, s.n, gen));
    EXPECT_EQ(f.rows(), s.m);
    EXPECT_EQ(f.cols(), s.n);
    EXPECT_EQ(f.inner(), s.r);
    expect_close(f.AB(), f.A() * f.B());
    expect_close(f.transpose().AB(), (f.A() * f.B()).transpose());
  }
  const FactoredMatrix square(random_matrix(6, 4, gen), random_matrix(4, 6, gen));
  expect_close(square.BA(), square.B() * square.A());
}

TEST(FactoredMatrix, ProductsStayFactoredWithTheSmallerInnerDimension) {
  Generator gen(2);
  const FactoredMatrix f(random_matrix(7, 3, gen), random_matrix(3, 5, gen));  // [7, 5] via 3
  const FactoredMatrix g(random_matrix(5, 4, gen), random_matrix(4, 6, gen));  // [5, 6] via 4
  const Eigen::MatrixXd right = random_matrix(5, 8, gen), left = random_matrix(2, 7, gen);
  const FactoredMatrix fg = f * g, gf = g.transpose() * f.transpose();
  expect_close(fg.AB(), f.AB() * g.AB());
  EXPECT_EQ(fg.inner(), 3);
  expect_close(gf.AB(), g.AB().transpose() * f.AB().transpose());
  EXPECT_EQ(gf.inner(), 3);
  expect_close((f * right).AB(), f.AB() * right);
  expect_close((left * f).AB(), left * f.AB());
  EXPECT_EQ((f * right).inner(), 3);
}

TEST(FactoredMatrix, NormAndSingularValuesMatchTheFormedProduct) {
  Generator gen(3);
  for (const Sizes s : kSizes) {
    const FactoredMatrix f(random_matrix(s.m, s.r, gen), random_matrix(s.r, s.n, gen));
    const Eigen::MatrixXd product = f.AB();
    EXPECT_NEAR(f.norm(), product.norm(), kTolerance * product.norm());
    const Eigen::VectorXd expected =
        Eigen::JacobiSVD<Eigen::MatrixXd>(product).singularValues().head(std::min({s.m, s.r, s.n}));
    const Svd svd = f.svd();
    expect_close(svd.S, expected);
    expect_close(svd.U * svd.S.asDiagonal() * svd.V.transpose(), product);
    expect_close(svd.U.transpose() * svd.U, Eigen::MatrixXd::Identity(svd.S.size(), svd.S.size()));
    expect_close(svd.V.transpose() * svd.V, Eigen::MatrixXd::Identity(svd.S.size(), svd.S.size()));
  }
}

TEST(FactoredMatrix, EigenvaluesAreTheNonzeroOnesOfTheProduct) {
  Generator gen(4);
  const FactoredMatrix f(random_matrix(9, 4, gen), random_matrix(4, 9, gen));
  const Eigen::VectorXcd expected_all =
      Eigen::EigenSolver<Eigen::MatrixXd>(f.AB(), false).eigenvalues();
  std::vector<std::complex<double>> expected(static_cast<size_t>(expected_all.size()));
  for (Eigen::Index i = 0; i < expected_all.size(); ++i) {
    expected[static_cast<size_t>(i)] = expected_all[i];
  }
  std::sort(expected.begin(), expected.end(),
            [](auto x, auto y) { return std::abs(x) > std::abs(y); });
  const Eigen::VectorXcd values = f.eigenvalues();
  ASSERT_EQ(values.size(), 4);
  const double scale = std::abs(expected[0]);
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(values[i].real(), expected[static_cast<size_t>(i)].real(), kTolerance * scale) << i;
    EXPECT_NEAR(std::abs(values[i].imag()), std::abs(expected[static_cast<size_t>(i)].imag()),
                kTolerance * scale)
        << i;
  }
  // The other five eigenvalues of the rank-4 product are zero.
  for (size_t i = 4; i < expected.size(); ++i) EXPECT_LT(std::abs(expected[i]), 1e-9 * scale);
}

TEST(FactoredMatrix, ReducedIsTheBestApproximationOfThatRank) {
  Generator gen(5);
  const FactoredMatrix f(random_matrix(8, 5, gen), random_matrix(5, 7, gen));
  const Eigen::JacobiSVD<Eigen::MatrixXd> full(f.AB(), Eigen::ComputeThinU | Eigen::ComputeThinV);
  for (int64_t k : {1, 3, 5}) {
    const FactoredMatrix reduced = f.reduced(k);
    EXPECT_EQ(reduced.inner(), k);
    expect_close(reduced.AB(), full.matrixU().leftCols(k) *
                                   full.singularValues().head(k).asDiagonal() *
                                   full.matrixV().leftCols(k).transpose());
  }
}

TEST(FactoredMatrix, ShapeErrorsNameBothShapes) {
  Generator gen(6);
  try {
    FactoredMatrix(random_matrix(4, 3, gen), random_matrix(2, 5, gen));
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(contains(e.what(), "A [4, 3] (M, R) and B [2, 5] (R, N)")) << e.what();
  }
  const FactoredMatrix f(random_matrix(4, 3, gen), random_matrix(3, 5, gen));
  try {
    (void)(f * random_matrix(4, 2, gen));
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(contains(e.what(), "the columns of [4, 5] are not the rows of [4, 2]")) << e.what();
  }
  try {
    (void)(f * f);
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(contains(e.what(), "FactoredMatrix @ FactoredMatrix: the columns of [4, 5]"))
        << e.what();
  }
  try {
    (void)f.eigenvalues();
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(contains(e.what(), "[4, 5], not square")) << e.what();
  }
  try {
    (void)f.reduced(4);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "rank 4 is not in [1, 3]")) << e.what();
  }
}

}  // namespace test_factored_matrix
}  // namespace gradlab::interp
