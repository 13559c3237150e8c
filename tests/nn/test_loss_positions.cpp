// DecoderLM::loss runs the last block, the final norm and the head only at the last position
// when it alone carries loss: the loss and every parameter's gradient equal those of the whole
// forward pass (float64, to 1e-12 relative) on a modular model and 2-layer models, other layouts
// keep the whole pass, and a hook or a cache still sees every position.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "nn/hooks.h"
#include "nn/models.h"
#include "tests/test_helpers.h"

namespace gradlab::nn {
namespace test_loss_positions {

// Nanda's grokking model in small: 1 layer, no norm, no bias, ReLU; P = 7 and '=' is token 7.
ModelConfig modular_config() {
  return {.vocab_size = 8,
          .max_len = 3,
          .d_model = 12,
          .num_layers = 1,
          .bias = false,
          .seed = 5,
          .attention = {.num_heads = 3},
          .norm = {.kind = kNoNorm},
          .feed_forward = {.d_ff = 20, .activation = kRelu}};
}

// Two layers, pre-LayerNorm with biases and a final norm, grouped K/V heads.
ModelConfig two_layer_config() {
  return {.vocab_size = 7,
          .max_len = 6,
          .d_model = 16,
          .num_layers = 2,
          .seed = 9,
          .attention = {.num_heads = 4, .num_kv_heads = 2},
          .feed_forward = {.d_ff = 24}};
}

std::shared_ptr<DecoderLM> model_of(const ModelConfig& config) {
  auto model = std::make_shared<DecoderLM>(config);
  model->to(DType::Float64);
  return model;
}

// [a, b, =, (a + b) mod 7] for a few pairs: inputs [B, 3], the loss at position 2 alone.
SequenceBatch modular_batch(const DecoderLM& model) {
  std::vector<int64_t> samples;
  for (int64_t a : {0, 3, 6, 2, 5}) {
    const int64_t b = (a * 3 + 1) % 7;
    samples.insert(samples.end(), {a, b, 7, (a + b) % 7});
  }
  return model.make_batch(Indices({5, 4}, samples), 2);
}

// Samples of 7 tokens with prompts of prompt_length: inputs [3, 6]; with a prompt of 5 the loss
// is at the last position alone, with a prompt of 3 (a copy task's layout) from position 3 on.
SequenceBatch batch_of(const DecoderLM& model, int64_t prompt_length) {
  return model.make_batch(
      Indices({3, 7}, {1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 0, 4, 5, 6, 6, 3, 2, 0, 6, 3, 2}),
      prompt_length);
}

struct LossAndGradients {
  double loss;
  std::vector<NamedTensor> gradients;
};

LossAndGradients backward_of(const DecoderLM& model, const Tensor& loss) {
  for (const auto& [name, parameter] : model.named_parameters()) Tensor(parameter).zero_grad();
  loss.backward();
  LossAndGradients result{loss.item(), {}};
  for (const auto& [name, parameter] : model.named_parameters()) {
    result.gradients.emplace_back(name, parameter.grad().clone());
  }
  return result;
}

void expect_equal_to_the_whole_pass(const DecoderLM& model, const SequenceBatch& batch,
                                    const std::string& what) {
  const LossAndGradients whole = backward_of(model, sequence_loss(model.forward(batch), batch));
  const LossAndGradients pruned = backward_of(model, model.loss(batch));
  EXPECT_NEAR(pruned.loss, whole.loss, 1e-12 * std::abs(whole.loss)) << what;
  ASSERT_EQ(pruned.gradients.size(), whole.gradients.size());
  for (size_t i = 0; i < whole.gradients.size(); ++i) {
    const Tensor& expected = whole.gradients[i].second;
    // Relative to the parameter's largest gradient (elements that cancel to ~0 round freely),
    // but for the key biases': a softmax does not change when one amount is added to every
    // score of a row, so their gradient is 0 up to rounding (~1e-17).
    const std::string& name = whole.gradients[i].first;
    double scale = 0;
    for (double g : expected.to_vector()) scale = std::max(scale, std::abs(g));
    const bool zero_up_to_rounding = name.ends_with("k_proj.bias");
    if (!zero_up_to_rounding) {
      ASSERT_GT(scale, 1e-6) << what << " " << name;
    }
    testing::expect_close(pruned.gradients[i].second, expected,
                          {.rtol = 0, .atol = zero_up_to_rounding ? 1e-15 : 1e-12 * scale},
                          what + " " + name);
  }
}

TEST(LossPositions, TheLossAndEveryGradientEqualTheWholePass) {
  const auto modular = model_of(modular_config());
  const SequenceBatch sums = modular_batch(*modular);
  EXPECT_EQ(modular->loss_from(sums), 2);
  expect_equal_to_the_whole_pass(*modular, sums, "modular");

  const auto two_layers = model_of(two_layer_config());
  const SequenceBatch answers = batch_of(*two_layers, 5);
  EXPECT_EQ(two_layers->loss_from(answers), 5);
  expect_equal_to_the_whole_pass(*two_layers, answers, "2 layers");
  // Post-norm blocks: the last block's norm acts after the residual sum.
  ModelConfig post_norm = two_layer_config();
  post_norm.block.pre_norm = false;
  const auto post = model_of(post_norm);
  expect_equal_to_the_whole_pass(*post, batch_of(*post, 5), "post-norm");

  // Several positions carry loss (a copy task's answer), or all of them (running text): the
  // whole pass, whose numbers stay what they were.
  const SequenceBatch copies = batch_of(*two_layers, 3);
  EXPECT_EQ(two_layers->loss_from(copies), 0);
  SequenceBatch every = copies;
  every.targets = every.inputs;
  EXPECT_EQ(two_layers->loss_from(every), 0);
}

// The block's part of the rule for any last positions: its output there, with the queries there
// alone (a causal mask shifted to their positions), is the whole block's.
TEST(LossPositions, ABlockAtItsLastPositionsEqualsTheWholeBlockThere) {
  for (bool pre_norm : {true, false}) {
    ModelConfig config = two_layer_config();
    config.block.pre_norm = pre_norm;
    const auto model = model_of(config);
    const Tensor x = Tensor::randn({3, 6, 16}, *model->dropout_gen, DType::Float64);
    AttentionMasks causal;
    causal.causal = true;
    const Tensor whole = model->blocks[1]->forward(x, causal);  // [B, T, C]
    for (int64_t first : {1, 3, 5}) {
      testing::expect_close(model->blocks[1]->forward_last_positions(x, first),
                            narrow(whole, 1, first, 6 - first), {.rtol = 1e-12, .atol = 1e-13},
                            "from position " + std::to_string(first));
    }
  }
}

TEST(LossPositions, AHookOrDropoutKeepsEveryPosition) {
  const auto model = model_of(modular_config());
  const SequenceBatch batch = modular_batch(*model);
  Shape seen;
  {
    HookScope scope(*model, batch,
                    {{"blocks.0.hook_resid_post", [&](const Tensor& value, const std::string&) {
                        seen = value.shape();
                        return Tensor();
                      }}});
    EXPECT_EQ(model->loss_from(batch), 0);
    const Tensor hooked = model->loss(batch);
    EXPECT_EQ(seen, (Shape{5, 3, 12}));
    EXPECT_NEAR(hooked.item(), sequence_loss(model->forward(batch), batch).item(), 1e-12);
  }
  EXPECT_EQ(model->loss_from(batch), 2);  // the scope has ended

  ModelConfig dropped = modular_config();
  dropped.dropout = 0.1;
  const auto with_dropout = model_of(dropped);
  EXPECT_EQ(with_dropout->loss_from(batch), 0);
  with_dropout->eval();
  EXPECT_EQ(with_dropout->loss_from(batch), 2);
}

}  // namespace test_loss_positions
}  // namespace gradlab::nn
