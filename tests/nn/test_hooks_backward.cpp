// Backward hooks (nn/hooks.h, HookDirection::Backward): a hook that scales a point's gradient
// scales exactly the parameter gradients upstream of it, a hook that reads sees what the cache's
// "_grad" reports, their order, their errors, and that a hooked call runs one forward pass.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "nn/hooks.h"
#include "nn/models.h"
#include "tests/test_helpers.h"

namespace gradlab::nn {
namespace test_hooks_backward {

using testing::contains;

// Unequal sizes: V = 7, T = 5 (of 9), C = 12, H = 3, F = 20, L = 2.
ModelConfig small_config() {
  return {.vocab_size = 7,
          .max_len = 9,
          .d_model = 12,
          .num_layers = 2,
          .seed = 5,
          .attention = {.num_heads = 3},
          .feed_forward = {.d_ff = 20}};
}

std::shared_ptr<SequenceModel> small_model(const ModelConfig& config = small_config()) {
  std::shared_ptr<SequenceModel> model = make_sequence_model("decoder", config);
  model->to(DType::Float64);
  model->eval();
  return model;
}

// [B = 2, T = 5] with prompts of 2 tokens.
SequenceBatch small_batch(const SequenceModel& model) {
  return model.make_batch(Indices({2, 6}, {1, 2, 0, 1, 2, 3, 4, 5, 0, 4, 5, 6}), 2);
}

HookFunction backward_times(double factor) {
  return [factor](const Tensor& grad, const std::string&) { return grad * factor; };
}

// The parameter gradients of one backward pass of the loss with hooks, by name.
std::map<std::string, std::vector<double>> parameter_gradients(const SequenceModel& model,
                                                               const SequenceBatch& batch,
                                                               const std::vector<Hook>& hooks) {
  for (Tensor p : model.parameters()) p.zero_grad();
  sequence_loss(run_with_hooks(model, batch, hooks), batch).backward();
  std::map<std::string, std::vector<double>> grads;
  for (const auto& [name, p] : model.named_parameters()) {
    grads[name] = p.grad().defined() ? p.grad().to_vector() : std::vector<double>(p.numel(), 0.0);
  }
  return grads;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

TEST(BackwardHooks, DoublingAGradientDoublesExactlyTheParametersUpstream) {
  const auto model = small_model();
  const SequenceBatch batch = small_batch(*model);
  const auto clean = parameter_gradients(*model, batch, {});
  // The residual stream before block 1 carries every gradient of the embedding and block 0.
  const auto hooked = parameter_gradients(
      *model, batch, {{"blocks.1.hook_resid_pre", backward_times(2.0), HookDirection::Backward}});
  int upstream = 0, downstream = 0;
  for (const auto& [name, values] : clean) {
    const bool before = starts_with(name, "embed.") || starts_with(name, "blocks.0.");
    std::vector<double> want = values;
    if (before) {
      for (double& v : want) v *= 2.0;
    }
    EXPECT_EQ(hooked.at(name), want) << name;
    if (values != std::vector<double>(values.size(), 0.0)) ++(before ? upstream : downstream);
  }
  // Some gradients of each side are not zero, so that the comparison can fail.
  EXPECT_GT(upstream, 0);
  EXPECT_GT(downstream, 0);
}

TEST(BackwardHooks, AReadingHookSeesTheCachedGradient) {
  // hook_result and hook_pattern: the composed attention path; sinusoidal hook_position: a point
  // no parameter produces.
  ModelConfig sinusoidal = small_config();
  sinusoidal.embedding.learned_positions = false;
  const auto model = small_model(sinusoidal);
  const SequenceBatch batch = small_batch(*model);
  for (const char* point : {"blocks.0.hook_resid_mid", "blocks.1.attn.hook_result",
                            "blocks.0.attn.hook_pattern", "embed.hook_position", "hook_logits"}) {
    const ActivationCache cache = run_with_cache(*model, batch, point, {.gradients = true});
    std::vector<Tensor> seen;
    const Tensor logits = run_with_hooks(*model, batch,
                                         {{point,
                                           [&](const Tensor& grad, const std::string& name) {
                                             EXPECT_EQ(name, point);
                                             seen.push_back(grad.clone());
                                             return Tensor();
                                           },
                                           HookDirection::Backward}});
    EXPECT_TRUE(seen.empty()) << point << ": a backward hook fired in the forward pass";
    sequence_loss(logits, batch).backward();
    ASSERT_EQ(seen.size(), 1u) << point;
    const Tensor cached = cache.at(std::string(point) + "_grad");
    EXPECT_EQ(seen[0].shape(), cached.shape()) << point;
    EXPECT_EQ(seen[0].to_vector(), cached.to_vector()) << point;
    EXPECT_GT(sum(cached * cached).item(), 0.0) << point;
  }
}

TEST(BackwardHooks, FireInTheirListedOrderAndTheCacheReadsWhatTheyPassOn) {
  const auto model = small_model();
  const SequenceBatch batch = small_batch(*model);
  const std::string point = "blocks.0.hook_attn_out";
  const ActivationCache clean = run_with_cache(*model, batch, point, {.gradients = true});
  std::vector<std::string> order;
  const auto note = [&](const std::string& who, double factor) {
    return [&order, who, factor](const Tensor& grad, const std::string&) {
      order.push_back(who);
      return grad * factor;
    };
  };
  const ActivationCache hooked = run_with_cache(
      *model, batch, point,
      {.gradients = true,
       .hooks = {{point, note("first", 2.0), HookDirection::Backward},
                 {"blocks.0.hook_attn_?ut", note("second", 4.0), HookDirection::Backward}}});
  EXPECT_EQ(order, (std::vector<std::string>{"first", "second"}));
  const Tensor want = clean.at(point + "_grad") * 8.0;
  EXPECT_EQ(hooked.at(point + "_grad").to_vector(), want.to_vector());
  EXPECT_EQ(hooked.at(point).to_vector(), clean.at(point).to_vector());  // forward untouched
}

TEST(BackwardHooks, AnEditInPlaceFlowsOnAndTouchesNoOtherGradient) {
  const auto model = small_model();
  const SequenceBatch batch = small_batch(*model);
  // hook_attn_out's gradient is the residual branch's too (an add's backward hands both the
  // same tensor): the edit must reach the attention's parameters only.
  const auto scaled = parameter_gradients(
      *model, batch, {{"blocks.1.hook_attn_out", backward_times(0.0), HookDirection::Backward}});
  const auto edited = parameter_gradients(*model, batch,
                                          {{"blocks.1.hook_attn_out",
                                            [](const Tensor& grad, const std::string&) {
                                              Tensor own = grad;
                                              double* values = own.mutable_data<double>();
                                              for (int64_t i = 0; i < own.numel(); ++i)
                                                values[i] = 0.0;
                                              return Tensor();
                                            },
                                            HookDirection::Backward}});
  EXPECT_EQ(edited, scaled);
  const std::vector<double> query = edited.at("blocks.1.attn.q_proj.weight");
  EXPECT_EQ(query, std::vector<double>(query.size(), 0.0));
  const std::vector<double> below = edited.at("blocks.0.attn.q_proj.weight");
  EXPECT_NE(below, std::vector<double>(below.size(), 0.0));
}

TEST(BackwardHooks, AThrowingHookLeavesNoGradientForTheNextPass) {
  const auto model = small_model();
  const SequenceBatch batch = small_batch(*model);
  const auto clean = parameter_gradients(*model, batch, {});
  const HookFunction fails = [](const Tensor&, const std::string&) -> Tensor {
    throw std::runtime_error("backward hook failed on purpose");
  };
  EXPECT_THROW(parameter_gradients(*model, batch,
                                   {{"blocks.0.hook_resid_mid", fails, HookDirection::Backward}}),
               std::runtime_error);
  EXPECT_FALSE(hooks_running());
  EXPECT_EQ(parameter_gradients(*model, batch, {}), clean);
}

TEST(BackwardHooks, Errors) {
  const auto model = small_model();
  const SequenceBatch batch = small_batch(*model);
  const Hook wrong_shape{"blocks.1.hook_resid_mid",
                         [](const Tensor&, const std::string&) {
                           return Tensor::zeros({2, 5, 11});
                         },
                         HookDirection::Backward};
  try {
    sequence_loss(run_with_hooks(*model, batch, {wrong_shape}), batch).backward();
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(
        contains(e.what(), "backward hook on blocks.1.hook_resid_mid: replacement [2,5,11]"))
        << e.what();
    EXPECT_TRUE(contains(e.what(), "gradient's [2,5,12] float64")) << e.what();
  }
  try {
    NoGradGuard no_grad;
    run_with_hooks(*model, batch, {{"hook_logits", backward_times(1.0), HookDirection::Backward}});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "run_with_hooks: backward hooks need grad mode")) << e.what();
  }
  try {
    run_with_cache(*model, batch, "hook_logits",
                   {.hooks = {{"hook_logits", backward_times(1.0), HookDirection::Backward}}});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "run_with_cache: backward hooks fire only with gradients"))
        << e.what();
  }
  try {
    run_with_hooks(*model, batch,
                   {{"blocks.0.hook_resid_mdi", backward_times(1.0), HookDirection::Backward}});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "'blocks.0.hook_resid_mdi' matches no hook point")) << e.what();
    EXPECT_TRUE(contains(e.what(), "closest: blocks.0.hook_resid_mid")) << e.what();
  }
}

// A decoder that counts its forward passes.
class CountingDecoder : public DecoderLM {
 public:
  using DecoderLM::DecoderLM;
  Tensor forward(const SequenceBatch& batch, AttentionMaps* maps = nullptr) const override {
    ++passes;
    return DecoderLM::forward(batch, maps);
  }
  mutable int passes = 0;
};

TEST(HookPasses, AHookedRunOrACacheRunsOneForwardPass) {
  CountingDecoder model(small_config());
  model.eval();
  const SequenceBatch batch = small_batch(model);
  const HookFunction none = [](const Tensor&, const std::string&) { return Tensor(); };
  run_with_hooks(model, batch, {{"blocks.*.hook_resid_post", none}});
  EXPECT_EQ(model.passes, 1);
  run_with_cache(model, batch, "*", {.hooks = {{"blocks.0.attn.hook_z", none}}});
  EXPECT_EQ(model.passes, 2);
  run_with_cache(model, batch, "blocks.0.*", {.gradients = true});
  EXPECT_EQ(model.passes, 3);
  // A filter that matches nothing is found after the pass, with the same message.
  EXPECT_THROW(run_with_hooks(model, batch, {{"blocks.9.*", none}}), ConfigError);
  EXPECT_EQ(model.passes, 4);
}

}  // namespace test_hooks_backward
}  // namespace gradlab::nn
