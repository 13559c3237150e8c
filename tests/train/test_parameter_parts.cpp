// The split of a step's loops over parameter elements (share_threads.h, kParameterParts): every
// element in one part; part p on thread p when the work is large and there are threads to give,
// on the calling thread otherwise; and the gradient norm and clipping built on it give the same
// bits on one thread and on two.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "autograd/elementwise.h"
#include "autograd/kernels/elementwise.h"
#include "autograd/random.h"
#include "autograd/tensor.h"
#include "tests/test_helpers.h"
#include "train/optimizer.h"
#include "train/share_threads.h"

namespace gradlab::train {
namespace test_parameter_parts {

using testing::ThreadCount;

TEST(ParameterParts, CoverEveryElementOnceInOrder) {
  for (const int64_t n : {0, 1, 2, 3, 7, 65537}) {
    int64_t next = 0;
    for (int64_t part = 0; part < kParameterParts; ++part) {
      const auto [begin, end] = parameter_part(n, part);
      EXPECT_EQ(begin, next) << "n " << n << ", part " << part;
      EXPECT_LE(begin, end) << "n " << n << ", part " << part;
      EXPECT_LE(end - begin, n / kParameterParts + 1) << "n " << n << ", part " << part;
      next = end;
    }
    EXPECT_EQ(next, n);
  }
}

// For each part: the OpenMP thread number and nesting level it ran at (-1: never ran).
struct PartThreads {
  std::vector<int> thread = std::vector<int>(kParameterParts, -1);
  std::vector<int> level = std::vector<int>(kParameterParts, -1);
  std::vector<int> runs = std::vector<int>(kParameterParts, 0);
  void run(int64_t elements) {
    for_parameter_parts(elements, [&](int64_t part) {
      const auto p = static_cast<size_t>(part);
      thread[p] = omp_get_thread_num();
      level[p] = omp_get_level();
      ++runs[p];
    });
  }
};

TEST(ParameterParts, LargeWorkOnTwoThreadsRunsPartPOnThreadP) {
  const ThreadCount two(2);
  // Twice, as two loops of a step over the same parameters: each part on the same thread.
  for (int round = 0; round < 2; ++round) {
    PartThreads parts;
    parts.run(kernels::kParallelThreshold + 1);
    for (int64_t p = 0; p < kParameterParts; ++p) {
      EXPECT_EQ(parts.runs[static_cast<size_t>(p)], 1) << p;
      EXPECT_EQ(parts.thread[static_cast<size_t>(p)], p) << p;
      EXPECT_EQ(parts.level[static_cast<size_t>(p)], 1) << p;
    }
  }
}

TEST(ParameterParts, SmallWorkOrOneThreadStaysOnTheCallingThread) {
  for (const auto& [count, elements] :
       {std::pair{2, kernels::kParallelThreshold}, std::pair{1, int64_t{1} << 24}}) {
    const ThreadCount threads_now(count);
    PartThreads parts;
    parts.run(elements);
    for (int64_t p = 0; p < kParameterParts; ++p) {
      EXPECT_EQ(parts.runs[static_cast<size_t>(p)], 1) << "threads " << count << ", part " << p;
      EXPECT_EQ(parts.level[static_cast<size_t>(p)], 0) << "threads " << count << ", part " << p;
    }
  }
}

// Tensors of unequal, odd sizes, together above the size at which the parts go to threads.
std::vector<Tensor> gradients_like(DType dtype) {
  Generator gen(7);
  std::vector<Tensor> tensors;
  for (const Shape& shape : {Shape{301, 173}, Shape{17}, Shape{129, 97}, Shape{1}}) {
    tensors.push_back(Tensor::randn(shape, gen, dtype) * 0.01);
  }
  return tensors;
}

double long_double_norm(const std::vector<Tensor>& tensors) {
  long double sum = 0;
  for (const Tensor& t : tensors) {
    for (double v : t.to_vector()) sum += static_cast<long double>(v) * v;
  }
  return static_cast<double>(std::sqrt(sum));
}

TEST(ParameterParts, GlobalNormIsTheSameBitsOnOneAndTwoThreads) {
  for (const DType dtype : {DType::Float32, DType::Float64}) {
    const std::vector<Tensor> tensors = gradients_like(dtype);
    double one = 0, two = 0;
    {
      const ThreadCount threads_now(1);
      one = global_norm(tensors);
    }
    {
      const ThreadCount threads_now(2);
      two = global_norm(tensors);
    }
    EXPECT_EQ(one, two) << dtype_name(dtype);
    EXPECT_NEAR(one, long_double_norm(tensors), 1e-13 * one) << dtype_name(dtype);
  }
}

TEST(ParameterParts, ClippingOnTwoThreadsScalesEveryElementAsOneThreadDoes) {
  std::vector<std::vector<double>> clipped[2];
  for (int threads = 1; threads <= 2; ++threads) {
    const ThreadCount threads_now(threads);
    std::vector<Tensor> params;
    for (const Tensor& g : gradients_like(DType::Float32)) {
      Tensor p = Tensor::zeros(g.shape());
      p.set_grad(g);
      params.push_back(p);
    }
    const double norm = clip_grad_norm(params, 0.5);
    ASSERT_GT(norm, 0.5);
    EXPECT_NEAR(
        global_norm({params[0].grad(), params[1].grad(), params[2].grad(), params[3].grad()}), 0.5,
        1e-6);
    for (const Tensor& p : params) clipped[threads - 1].push_back(p.grad().to_vector());
  }
  ASSERT_EQ(clipped[0].size(), clipped[1].size());
  for (size_t i = 0; i < clipped[0].size(); ++i) EXPECT_EQ(clipped[0][i], clipped[1][i]) << i;
}

}  // namespace test_parameter_parts
}  // namespace gradlab::train
