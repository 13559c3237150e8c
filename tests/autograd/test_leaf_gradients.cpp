// LeafGradientScope: backward() under it leaves the leaves' gradients in a LeafGradients, the
// same values bit for bit, and touches no leaf; several threads can backpropagate graphs over the
// same parameters at once, each into its own.
#include <gtest/gtest.h>

#include "tests/test_helpers.h"

#include <cstring>
#include <thread>
#include <vector>

#include "autograd/graph.h"
#include "autograd/ops.h"

namespace gradlab {
namespace test_leaf_gradients {

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.node()->storage->data(), b.node()->storage->data(),
                     static_cast<size_t>(a.numel()) * dtype_size(a.dtype())) == 0;
}

// Parameters of unequal sizes on every axis, each reaching the loss by several paths (w twice,
// b through a broadcast), so that a collected gradient is a sum of contributions.
struct Model {
  Tensor w, b;
  explicit Model(uint64_t seed) {
    Generator gen(seed);
    w = Tensor::randn({5, 3}, gen).set_requires_grad();
    b = Tensor::randn({3}, gen).set_requires_grad();
  }
  Tensor loss(uint64_t seed) const {
    Generator gen(seed);
    const Tensor x = Tensor::randn({7, 5}, gen);
    const Tensor h = tanh(matmul(x, w) + b);  // [7, 3]
    return sum(h * h) + sum(matmul(x, w * w));
  }
};

TEST(LeafGradients, CollectWhatBackwardWouldAddAndLeaveTheLeavesAlone) {
  Model model(1);
  model.loss(10).backward();
  model.loss(11).backward();  // the second pass adds to the first
  const Tensor want_w = model.w.grad().clone(), want_b = model.b.grad().clone();
  model.w.zero_grad();
  model.b.zero_grad();

  LeafGradients collected;
  {
    const LeafGradientScope scope(collected);
    model.loss(10).backward();
    model.loss(11).backward();
  }
  EXPECT_FALSE(model.w.grad().defined());
  EXPECT_FALSE(model.b.grad().defined());
  EXPECT_TRUE(same_bits(collected.of(model.w), want_w));
  EXPECT_TRUE(same_bits(collected.of(model.b), want_b));
  EXPECT_FALSE(collected.of(Tensor::zeros({5, 3}).set_requires_grad()).defined());

  // After the scope, backward adds to the leaves again.
  model.loss(10).backward();
  EXPECT_TRUE(model.w.grad().defined());
}

TEST(LeafGradients, TheInnermostScopeCollectsAndARootLeafCounts) {
  const Model model(2);
  LeafGradients outer, inner;
  const LeafGradientScope outer_scope(outer);
  {
    const LeafGradientScope inner_scope(inner);
    model.loss(3).backward();
  }
  EXPECT_TRUE(inner.of(model.w).defined());
  EXPECT_FALSE(outer.of(model.w).defined());
  // A leaf backpropagated itself: its gradient is the given one.
  const Tensor g = Tensor::full({3}, 2.5);
  model.b.backward(g);
  EXPECT_TRUE(same_bits(outer.of(model.b), g));
  EXPECT_FALSE(model.b.grad().defined());
}

TEST(LeafGradients, ThreadsBackpropagateTheSameParametersAtOnce) {
  const Model model(4);
  constexpr int kThreads = 4;
  constexpr int kPasses = 25;
  std::vector<Tensor> want(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    LeafGradients alone;
    const LeafGradientScope scope(alone);
    for (int pass = 0; pass < kPasses; ++pass) model.loss(100 * t + pass).backward();
    want[t] = alone.of(model.w).clone();
  }
  std::vector<LeafGradients> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const LeafGradientScope scope(got[t]);
      for (int pass = 0; pass < kPasses; ++pass) model.loss(100 * t + pass).backward();
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_TRUE(same_bits(got[t].of(model.w), want[t])) << "thread " << t;
  }
  EXPECT_FALSE(same_bits(want[0], want[1]));  // the threads' passes differ
  EXPECT_FALSE(model.w.grad().defined());
}

}  // namespace test_leaf_gradients
}  // namespace gradlab
