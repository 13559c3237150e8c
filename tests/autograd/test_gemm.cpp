// The matrix-product kernel against a plain triple loop in long double: every transpose
// combination, sizes that are not multiples of its blocks (rows, vectors, groups, k-blocks),
// strided operands, bias, accumulation, k = 0, and threads that must not change a bit.
#include "autograd/kernels/gemm.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace gradlab::kernels {
namespace test_gemm {

struct Case {
  int64_t m, n, k;
  bool trans_a, trans_b;
};

template <class T>
struct Problem {
  Case shape;
  int64_t lda, ldb, ldc;  // larger than the logical widths: strided views
  std::vector<T> a, b, bias, c;

  explicit Problem(Case s, uint64_t seed) : shape(s) {
    lda = (s.trans_a ? s.m : s.k) + 3;
    ldb = (s.trans_b ? s.k : s.n) + 5;
    ldc = s.n + 2;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    auto fill = [&](std::vector<T>& v, int64_t size) {
      v.resize(size);
      for (T& x : v) x = static_cast<T>(u(rng));
    };
    fill(a, (s.trans_a ? s.k : s.m) * lda);
    fill(b, (s.trans_b ? s.n : s.k) * ldb);
    fill(bias, s.n);
    fill(c, s.m * ldc);
  }

  T at_a(int64_t i, int64_t p) const { return shape.trans_a ? a[p * lda + i] : a[i * lda + p]; }
  T at_b(int64_t p, int64_t j) const { return shape.trans_b ? b[j * ldb + p] : b[p * ldb + j]; }

  // The expected c after gemm, from the c the problem was created with.
  std::vector<long double> reference(bool accumulate, bool with_bias) const {
    std::vector<long double> want(c.size());
    for (int64_t i = 0; i < shape.m; ++i) {
      for (int64_t j = 0; j < shape.n; ++j) {
        long double s = accumulate ? c[i * ldc + j] : 0.0L;
        if (with_bias) s += bias[j];
        for (int64_t p = 0; p < shape.k; ++p) s += (long double)at_a(i, p) * at_b(p, j);
        want[i * ldc + j] = s;
      }
    }
    return want;
  }

  std::vector<T> run(bool accumulate, bool with_bias, bool parallel) const {
    std::vector<T> out = c;
    gemm<T>(shape.m, shape.n, shape.k, {a.data(), lda, shape.trans_a},
            {b.data(), ldb, shape.trans_b}, out.data(), ldc, accumulate,
            with_bias ? bias.data() : nullptr, parallel);
    return out;
  }
};

std::string describe(const Case& s) {
  return "m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) +
         (s.trans_a ? " A^T" : " A") + (s.trans_b ? " B^T" : " B");
}

std::vector<Case> cases() {
  // Rows around the 6-row tile and the 192 rows up to which B may be read in place, columns
  // around 16-lane vectors, the 64-wide panel and the 512-column group, depths around the
  // 256-step k-block; from 1024 steps on, 512-step blocks in 256-column groups (the 1030 and
  // 1537 cases); one-vector-wide outputs on enough rows for their tall tiles (24 rows with
  // AVX-512, 12 below it: the last two); all three sizes differ in every case.
  const int64_t shapes[][3] = {{1, 1, 1},       {7, 3, 5},     {13, 17, 129}, {6, 64, 256},
                               {25, 65, 31},    {5, 130, 257}, {37, 12, 64},  {64, 200, 48},
                               {9, 48, 70},     {200, 96, 20}, {7, 530, 300}, {11, 70, 513},
                               {19, 270, 1030}, {8, 33, 1537}, {30, 5, 40},   {50, 8, 19}};
  std::vector<Case> out;
  for (const auto& s : shapes)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) out.push_back({s[0], s[1], s[2], ta, tb});
  return out;
}

template <class T>
void expect_matches(const Case& s, double tolerance) {
  const Problem<T> problem(s, 1234 + s.m * 31 + s.n * 7 + s.k);
  for (bool accumulate : {false, true}) {
    for (bool with_bias : {false, true}) {
      const std::vector<long double> want = problem.reference(accumulate, with_bias);
      const std::vector<T> got = problem.run(accumulate, with_bias, /*parallel=*/false);
      for (int64_t i = 0; i < s.m; ++i) {
        for (int64_t j = 0; j < s.n; ++j) {
          const long double w = want[i * problem.ldc + j];
          ASSERT_NEAR(got[i * problem.ldc + j], w, tolerance * (1 + std::abs((double)w)))
              << describe(s) << " accumulate=" << accumulate << " bias=" << with_bias << " at ("
              << i << ", " << j << ")";
        }
        // The padding between rows of c is never written.
        for (int64_t j = s.n; j < problem.ldc && i * problem.ldc + j < (int64_t)got.size(); ++j)
          ASSERT_EQ(got[i * problem.ldc + j], problem.c[i * problem.ldc + j]) << describe(s);
      }
    }
  }
}

TEST(Gemm, DoubleMatchesTheTripleLoopForEveryLayoutAndEdge) {
  for (const Case& s : cases()) expect_matches<double>(s, 1e-13);
}

TEST(Gemm, FloatMatchesTheTripleLoopForEveryLayoutAndEdge) {
  // Sums of a thousand or more float products round by more than 1e-5 of their size; the deep
  // products' blocking is the same code for both types, checked above in double.
  for (const Case& s : cases()) {
    if (s.k < 1024) expect_matches<float>(s, 1e-5);
  }
}

TEST(Gemm, EmptyDepthWritesBiasOrZerosOrKeepsC) {
  const Problem<double> problem({9, 21, 0, false, true}, 7);
  const std::vector<double> zeros = problem.run(false, false, false);
  const std::vector<double> biased = problem.run(false, true, false);
  const std::vector<double> kept = problem.run(true, false, false);
  for (int64_t i = 0; i < 9; ++i) {
    for (int64_t j = 0; j < 21; ++j) {
      const int64_t at = i * problem.ldc + j;
      EXPECT_EQ(zeros[at], 0.0);
      EXPECT_EQ(biased[at], problem.bias[j]);
      EXPECT_EQ(kept[at], problem.c[at]);
    }
  }
}

TEST(Gemm, ThreadsDoNotChangeABit) {
  const int previous = omp_get_max_threads();
  omp_set_num_threads(2);
  for (const Case& s : {Case{301, 70, 300, false, true}, Case{97, 45, 513, true, false},
                        Case{61, 290, 1100, true, true}}) {
    const Problem<float> problem(s, 99);
    const std::vector<float> serial = problem.run(false, true, false);
    const std::vector<float> threaded = problem.run(false, true, true);
    EXPECT_EQ(serial, threaded) << describe(s);
  }
  omp_set_num_threads(previous);
}

}  // namespace test_gemm
}  // namespace gradlab::kernels
