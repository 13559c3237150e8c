// The fused feed-forward sublayer (autograd/feed_forward.h) against the composed ops it
// replaces: the same values and gradients bit for bit, in float32 and float64, with and without
// biases, on one thread and on two. Its float64 gradient checks are in the op registry
// (autograd/op_checks.cpp); the module's use of it in tests/test_module_gradients.cpp.
#include <gtest/gtest.h>
#include <omp.h>

#include "autograd/feed_forward.h"
#include "autograd/ops.h"
#include "tests/test_helpers.h"

namespace gradlab {
namespace {

// A leaf of random values.
Tensor leaf(Generator& gen, const Shape& shape, DType dtype, double scale = 1.0) {
  return (Tensor::randn(shape, gen, DType::Float64) * scale).to(dtype).set_requires_grad();
}

struct Case {
  Tensor x;
  FeedForwardWeights w;
  Tensor upstream;  // dL/dy
};

// x [3,97,44]: 291 rows, two whole blocks of the kernel and a part, four whole layer-norm
// blocks and a part; 44 channels (vectors and a tail); hidden width 176, enough work for the
// kernel to share it between two threads.
Case make_case(DType dtype, bool biases) {
  Generator gen(5);
  const int64_t c = 44, f = 176;
  Case k;
  k.x = leaf(gen, {3, 97, c}, dtype);
  k.w.norm_weight = leaf(gen, {c}, dtype);
  if (biases) k.w.norm_bias = leaf(gen, {c}, dtype);
  k.w.fc1_weight = leaf(gen, {f, c}, dtype, 0.2);
  if (biases) k.w.fc1_bias = leaf(gen, {f}, dtype);
  k.w.fc2_weight = leaf(gen, {c, f}, dtype, 0.2);
  if (biases) k.w.fc2_bias = leaf(gen, {c}, dtype);
  k.upstream = Tensor::randn({3, 97, c}, gen, DType::Float64).to(dtype);
  return k;
}

std::vector<Tensor> inputs_of(const Case& k) {
  const FeedForwardWeights& w = k.w;
  return {k.x, w.norm_weight, w.norm_bias, w.fc1_weight, w.fc1_bias, w.fc2_weight, w.fc2_bias};
}

// The output and every input's gradient, after one backward of k.upstream.
std::vector<std::vector<double>> run(const Case& k, bool fused, int threads) {
  omp_set_num_threads(threads);
  for (Tensor t : inputs_of(k)) {
    if (t.defined()) t.zero_grad();
  }
  const FeedForwardWeights& w = k.w;
  const Tensor y =
      fused ? feed_forward_residual(k.x, w)
            : k.x + linear(gelu(linear(layer_norm(k.x, w.norm_weight, w.norm_bias, w.eps),
                                       w.fc1_weight, w.fc1_bias)),
                           w.fc2_weight, w.fc2_bias);
  y.backward(k.upstream);
  omp_set_num_threads(1);
  std::vector<std::vector<double>> results{y.to_vector()};
  for (const Tensor& t : inputs_of(k)) {
    if (t.defined()) results.push_back(t.grad().to_vector());
  }
  return results;
}

void expect_bitwise_equal(const std::vector<std::vector<double>>& got,
                          const std::vector<std::vector<double>>& want, const char* what) {
  const char* names[] = {
      "output", "dx", "first parameter's gradient", "second", "third", "fourth", "fifth", "sixth"};
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size());
    size_t differing = 0;
    for (size_t j = 0; j < want[i].size(); ++j) differing += got[i][j] != want[i][j];
    EXPECT_EQ(differing, 0u) << what << ": " << names[std::min<size_t>(i, 7)] << " (" << i << "), "
                             << differing << " of " << want[i].size() << " differ";
  }
}

class FeedForwardResidual : public ::testing::TestWithParam<std::tuple<DType, bool>> {};

TEST_P(FeedForwardResidual, EqualsTheComposedOpsBitForBitOnOneAndTwoThreads) {
  const auto [dtype, biases] = GetParam();
  const Case k = make_case(dtype, biases);
  // The composed ops on one thread: GELU's backward splits its elements between two threads at
  // a point that need not fall on a vector boundary, so two threads round a few elements apart.
  const auto composed = run(k, false, 1);
  expect_bitwise_equal(run(k, true, 1), composed, "fused, 1 thread");
  expect_bitwise_equal(run(k, true, 2), composed, "fused, 2 threads");
  // The comparison can fail: another upstream gradient changes every gradient.
  Case other = k;
  other.upstream = k.upstream * 1.5;
  const auto scaled = run(other, true, 1);
  EXPECT_NE(scaled[1], composed[1]);
  EXPECT_EQ(scaled[0], composed[0]);
}

INSTANTIATE_TEST_SUITE_P(
    DTypesAndBiases, FeedForwardResidual,
    ::testing::Combine(::testing::Values(DType::Float32, DType::Float64), ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<DType, bool>>& info) {
      return std::string(std::get<0>(info.param) == DType::Float32 ? "float32" : "float64") +
             (std::get<1>(info.param) ? "_biases" : "_no_biases");
    });

TEST(FeedForwardResidualErrors, ShapeMismatchesNameTheOpAndBothShapes) {
  const Case k = make_case(DType::Float32, true);
  auto message = [&](FeedForwardWeights w, const Tensor& x) {
    try {
      feed_forward_residual(x, w);
    } catch (const ShapeError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  FeedForwardWeights w = k.w;
  w.fc2_weight = Tensor::zeros({44, 177}, DType::Float32);
  EXPECT_EQ(message(w, k.x),
            "feed_forward_residual: fc2 weight [44,177] does not match input [3,97,44] "
            "(expected [44,176])");
  w = k.w;
  w.norm_bias = Tensor::zeros({43}, DType::Float32);
  EXPECT_EQ(message(w, k.x),
            "feed_forward_residual: layer norm bias [43] does not match input [3,97,44] "
            "(expected [44])");
  w = k.w;
  EXPECT_EQ(message(w, Tensor::zeros({3, 97, 45}, DType::Float32)),
            "feed_forward_residual: layer norm weight [44] does not match input [3,97,45] "
            "(expected [45])");
  w.fc1_weight = Tensor::zeros({176}, DType::Float32);
  EXPECT_EQ(message(w, k.x), "feed_forward_residual: fc1 weight [176] must be [F, C]");
  w.fc1_weight = Tensor();
  EXPECT_EQ(message(w, k.x), "feed_forward_residual: fc1 weight is required");
  EXPECT_THROW(feed_forward_residual(k.x.to(DType::Float64), k.w), DTypeError);
}

}  // namespace
}  // namespace gradlab
