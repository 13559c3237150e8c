// StackedLinear computes what one linear layer over the concatenated weights computes, with
// each layer's gradients in its own parameters; its stacked copy is made once and made again
// after any write to a parameter, however it was written.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/attention.h"
#include "nn/stacked_linear.h"
#include "tests/test_helpers.h"
#include "train/optimizer.h"

namespace gradlab::nn {
namespace test_stacked_linear {

// Three layers of 5 inputs and 4, 6 and 7 outputs: every size differs.
struct Layers {
  std::vector<std::shared_ptr<Linear>> layers;
  std::vector<Tensor> weights, biases;
};

Layers make_layers(bool bias, DType dtype) {
  Generator gen(11);
  Layers l;
  for (const int64_t out : {4, 6, 7}) {
    auto layer = std::make_shared<Linear>(5, out, gen, bias);
    layer->to(dtype);
    for (Tensor p : layer->parameters()) p.copy_from(Tensor::randn(p.shape(), gen, dtype));
    l.weights.push_back(layer->weight);
    if (bias) l.biases.push_back(layer->bias);
    l.layers.push_back(layer);
  }
  return l;
}

// The storage of the stacked weight a forward pass used: linear's second input.
const void* stacked_weight_of(const Tensor& out) {
  return out.node()->inputs.at(1)->storage.get();
}

TEST(StackedLinear, IsLinearOverTheConcatenatedWeightsBitForBit) {
  for (const bool bias : {true, false}) {
    Layers l = make_layers(bias, DType::Float32);
    const StackedLinear stacked(l.layers);
    Generator gen(12);
    const Tensor x = Tensor::randn({2, 3, 5}, gen).set_requires_grad();
    const Tensor upstream = Tensor::randn({2, 3, 17}, gen);

    const Tensor got = stacked.forward(x);
    sum(got * upstream).backward();
    std::vector<Tensor> got_grads{x.grad()};
    for (const auto& layer : l.layers) {
      for (Tensor p : layer->parameters()) {
        got_grads.push_back(p.grad());
        p.zero_grad();
      }
    }
    Tensor x_again = x.detach().set_requires_grad();
    const Tensor want =
        linear(x_again, concat(l.weights, 0), bias ? concat(l.biases, 0) : Tensor());  // [2, 3, 17]
    sum(want * upstream).backward();
    std::vector<Tensor> want_grads{x_again.grad()};
    for (const auto& layer : l.layers) {
      for (const Tensor& p : layer->parameters()) want_grads.push_back(p.grad());
    }

    EXPECT_TRUE(allclose(got, want, 0, 0)) << "bias " << bias;
    ASSERT_EQ(got_grads.size(), want_grads.size());
    for (size_t i = 0; i < got_grads.size(); ++i) {
      EXPECT_TRUE(allclose(got_grads[i], want_grads[i], 0, 0)) << "bias " << bias << ", " << i;
    }
  }
}

TEST(StackedLinear, StacksAgainOnlyAfterAParameterIsWritten) {
  Layers l = make_layers(true, DType::Float32);
  const StackedLinear stacked(l.layers);
  Generator gen(13);
  const Tensor x = Tensor::randn({2, 3, 5}, gen).set_requires_grad();
  auto expected = [&] { return linear(x, concat(l.weights, 0), concat(l.biases, 0)); };

  // Forward and backward passes read the parameters without writing them.
  Tensor out = stacked.forward(x);
  const void* first = stacked_weight_of(out);
  sum(out).backward();
  out = stacked.forward(x);
  EXPECT_EQ(stacked_weight_of(out), first);
  // Nor does reading one through a handle that could write it.
  EXPECT_TRUE(std::isfinite(l.weights[1].data<float>()[3]));
  out = stacked.forward(x);
  EXPECT_EQ(stacked_weight_of(out), first);

  // Every way of writing a parameter makes the next pass stack again, and see the new values.
  const std::vector<std::function<void()>> writes{
      [&] { l.weights[1].mutable_data<float>()[3] += 1; },
      [&] { l.biases[2].copy_from(Tensor::full({7}, 0.5)); },
      [&] {
        auto adamw = train::make_optimizer({}, l.layers[0]->named_parameters());
        adamw->step(0.1);
      },
      [&] {
        reshape(l.weights[2].detach(), {-1}).mutable_data<float>()[0] = 2;
      },  // a shared storage
  };
  for (size_t i = 0; i < writes.size(); ++i) {
    const void* before = stacked_weight_of(out);
    writes[i]();
    out = stacked.forward(x);
    EXPECT_NE(stacked_weight_of(out), before) << "write " << i;
    EXPECT_TRUE(allclose(out, expected(), 0, 0)) << "write " << i;
  }
}

TEST(StackedLinear, FollowsItsLayersToFloat64) {
  Layers l = make_layers(true, DType::Float32);
  const StackedLinear stacked(l.layers);
  Generator gen(14);
  EXPECT_EQ(stacked.forward(Tensor::randn({3, 5}, gen)).dtype(), DType::Float32);
  for (const auto& layer : l.layers) layer->to(DType::Float64);
  const Tensor x = Tensor::randn({3, 5}, gen, DType::Float64);
  EXPECT_TRUE(
      allclose(stacked.forward(x), linear(x, concat(l.weights, 0), concat(l.biases, 0)), 0, 0));
}

// The gradient check perturbs each parameter in place between passes: the stacked copy must
// follow every perturbation for the numerical gradient to be right.
TEST(StackedLinear, GradientMatchesCentralDifferences) {
  Layers l = make_layers(true, DType::Float64);
  const StackedLinear stacked(l.layers);
  Generator gen(15);
  std::vector<Tensor> wrt{Tensor::randn({2, 3, 5}, gen, DType::Float64).set_requires_grad()};
  for (const auto& layer : l.layers) {
    for (const Tensor& p : layer->parameters()) wrt.push_back(p);
  }
  const GradcheckReport report = gradcheck_tensors([&] { return stacked.forward(wrt[0]); }, wrt);
  EXPECT_TRUE(report.passed()) << describe(report);
  EXPECT_EQ(report.inputs.size(), 7u);
}

TEST(StackedLinear, RejectsLayersWithDifferentInputs) {
  Generator gen(16);
  const auto a = std::make_shared<Linear>(5, 4, gen);
  const auto b = std::make_shared<Linear>(6, 4, gen);
  const auto no_bias = std::make_shared<Linear>(5, 4, gen, false);
  try {
    StackedLinear({a, b});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(testing::contains(e.what(), "[4,5]")) << e.what();
    EXPECT_TRUE(testing::contains(e.what(), "[4,6]")) << e.what();
  }
  EXPECT_THROW(StackedLinear({a, no_bias}), ConfigError);
  EXPECT_THROW(StackedLinear({}), ConfigError);
}

// Self-attention through the stacked projection sees an optimizer step: after it, the fused
// path (stacked Q/K/V) and the composed path (three projections) still agree.
TEST(StackedLinear, SelfAttentionFollowsAnOptimizerStep) {
  Generator gen(17);
  MultiHeadAttention attn({.d_model = 12, .num_heads = 3}, gen);
  const Tensor x = Tensor::randn({2, 5, 12}, gen);
  sum(attn.forward(x) * attn.forward(x)).backward();
  auto adamw = train::make_optimizer({}, attn.named_parameters());
  adamw->step(0.1);
  AttentionTrace trace;
  const Tensor composed = attn.forward_with_weights(x, x, {}, &trace).output;
  EXPECT_TRUE(allclose(attn.forward(x), composed, 1e-5, 1e-6));
}

}  // namespace test_stacked_linear
}  // namespace gradlab::nn
