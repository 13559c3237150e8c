// The short sums behind layer norm, softmax and attention rows: sum_over against a long double
// sum, and row_sums (several rows per vector) against sum_over bit for bit, for every number of
// rows up to a vector's lanes and row lengths around whole vectors.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "autograd/kernels.h"

namespace gradlab::kernels {
namespace {

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
void check_row_sums() {
  constexpr int64_t lanes = simd::kLanes<T>;
  for (const int64_t n : kLengths) {
    const std::vector<T> x = random_values<T>(lanes * n, 11 + n);
    for (int64_t count = 1; count <= lanes; ++count) {
      const simd::Vec<T> sums =
          row_sums<T>(count, n, [&](int64_t r, int64_t i) { return x[r * n + i]; });
      for (int64_t r = 0; r < lanes; ++r) {
        const T expected =
            r < count ? sum_over<T>(n, [&](int64_t i) { return x[r * n + i]; }) : T(0);
        EXPECT_EQ(sums[r], expected) << "n = " << n << ", rows = " << count << ", row " << r;
      }
    }
  }
}

TEST(Sums, SumOverAddsEveryTerm) {
  check_sum_over<float>();
  check_sum_over<double>();
}

TEST(Sums, RowSumsEqualSumOverBitForBit) {
  check_row_sums<float>();
  check_row_sums<double>();
}

}  // namespace
}  // namespace gradlab::kernels
