// The row kernels behind layer norm, softmax, cross-entropy and attention rows, on lengths around
// whole vectors and blocks: sum_over against a long double sum, and exp_shifted against
// std::exp, with exact zeros for masked entries and nothing written past the row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "autograd/kernels/rows.h"

namespace gradlab::kernels {
namespace test_kernels {

template <class T>
std::vector<T> random_values(int64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<T> v(static_cast<size_t>(count));
  for (T& x : v) x = static_cast<T>(u(rng));
  return v;
}

// Lengths below, at and past whole vectors, with and without a tail.
const int64_t kLengths[] = {0, 1, 3, 15, 16, 17, 37, 64, 67};

template <class T>
void check_sum_over() {
  for (const int64_t n : kLengths) {
    const std::vector<T> x = random_values<T>(n, 7 + n);
    long double exact = 0;
    for (const T v : x) exact += v;
    const T sum = sum_over<T>(n, [&](int64_t i) { return x[i]; });
    EXPECT_NEAR(static_cast<double>(sum), static_cast<double>(exact),
                4 * static_cast<double>(std::numeric_limits<T>::epsilon()) * n)
        << "n = " << n;
  }
}

template <class T>
void check_exp_shifted() {
  constexpr T minus_inf = -std::numeric_limits<T>::infinity();
  constexpr T sentinel = T(-7);
  const T shift = T(1.5);
  for (const int64_t n : {1, 3, 12, 15, 16, 17, 33, 40}) {
    std::vector<T> x = random_values<T>(n, 5 + n);
    for (int64_t i = 0; i < n; ++i) x[i] = x[i] * 8 - 2;  // [-10, 6)
    x[n / 2] = minus_inf;                                 // a masked entry
    for (const bool in_place : {false, true}) {
      std::vector<T> y(static_cast<size_t>(n + 20), sentinel);
      if (in_place) std::copy(x.begin(), x.end(), y.begin());
      exp_shifted<T>(in_place ? y.data() : x.data(), y.data(), n, shift);
      for (int64_t i = 0; i < n; ++i) {
        const double expected = std::exp(static_cast<double>(x[i]) - static_cast<double>(shift));
        if (x[i] == minus_inf) {
          EXPECT_EQ(y[i], T(0)) << "n = " << n << ", masked entry " << i;
        } else {
          EXPECT_NEAR(static_cast<double>(y[i]), expected,
                      8 * static_cast<double>(std::numeric_limits<T>::epsilon()) * expected)
              << "n = " << n << ", i = " << i;
        }
      }
      for (int64_t i = n; i < n + 20; ++i) {
        EXPECT_EQ(y[i], sentinel) << "n = " << n << ": element " << i << " past the row written";
      }
    }
  }
}

TEST(RowKernels, ExpShiftedMatchesExpAndStaysInsideTheRow) {
  check_exp_shifted<float>();
  check_exp_shifted<double>();
}

TEST(RowKernels, SumOverAddsEveryTerm) {
  check_sum_over<float>();
  check_sum_over<double>();
}

}  // namespace test_kernels
}  // namespace gradlab::kernels
