// A block's split inputs (hook_attn_in, hook_q_input, hook_k_input, hook_v_input, the
// cross-attention's, hook_mlp_in): identity hooks leave the logits as they are in every model
// kind, an edit of one head's copy moves that head alone, and gradients flow through the split
// path as central differences say.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "autograd/error.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "nn/hooks.h"
#include "nn/models.h"
#include "tests/test_helpers.h"

namespace gradlab::nn {
namespace test_split_inputs {

// H = 4 query heads over KV = 2 K/V heads unless told; C = 24, D = 6, F = 20, V = 7.
std::shared_ptr<SequenceModel> model_of(const std::string& kind, int64_t num_kv_heads = 0,
                                        bool pre_norm = true) {
  std::shared_ptr<SequenceModel> model =
      make_sequence_model(kind, {.vocab_size = 7,
                                 .max_len = 9,
                                 .d_model = 24,
                                 .num_layers = 2,
                                 .seed = 11,
                                 .attention = {.num_heads = 4, .num_kv_heads = num_kv_heads},
                                 .feed_forward = {.d_ff = 20},
                                 .block = {.pre_norm = pre_norm}});
  model->to(DType::Float64);
  model->eval();
  return model;
}

// Three samples with prompts of 2 tokens: B = 3, T = 5 in the decoder.
SequenceBatch batch_for(const SequenceModel& model) {
  return model.make_batch(Indices({3, 6}, {1, 2, 0, 1, 2, 3, 4, 5, 0, 4, 5, 6, 6, 3, 0, 2, 2, 1}),
                          2);
}

bool is_split_input(const std::string& name) {
  for (const char* suffix :
       {"hook_attn_in", "hook_q_input", "hook_k_input", "hook_v_input", "hook_cross_q_input",
        "hook_cross_k_input", "hook_cross_v_input", "hook_mlp_in"}) {
    if (name.ends_with(std::string(".") + suffix)) return true;
  }
  return false;
}

// Every split input hooked by a hook that returns its activation: the split path, with nothing
// edited. Counts the points it met.
Tensor logits_through_split_path(const SequenceModel& model, const SequenceBatch& batch,
                                 int* points_met) {
  return run_with_hooks(model, batch,
                        {{HookFilter(is_split_input, "split inputs"),
                          [points_met](const Tensor& value, const std::string&) {
                            ++*points_met;
                            return value;
                          }}});
}

TEST(SplitInputs, IdentityHooksLeaveTheLogitsInEveryModelKind) {
  struct Case {
    const char* kind;
    int64_t kv_heads;
    bool pre_norm;
    int points;  // per model: 5 per decoder-only block; seq2seq adds the cross-attention's 3
  };
  for (const Case& c : {Case{"decoder", 0, true, 10}, Case{"decoder", 2, true, 10},
                        Case{"decoder", 0, false, 10}, Case{"seq2seq", 2, true, 26}}) {
    const auto model = model_of(c.kind, c.kv_heads, c.pre_norm);
    const SequenceBatch batch = batch_for(*model);
    const Tensor plain = model->forward(batch);
    int met = 0;
    const Tensor split = logits_through_split_path(*model, batch, &met);
    EXPECT_EQ(met, c.points) << c.kind;
    testing::expect_close(split, plain, {.rtol = 0, .atol = 1e-12}, c.kind);
  }
}

// The first block's attention, its keys cached, with hook_k_input's K/V head 1 moved.
TEST(SplitInputs, EditingOneKvHeadsCopyMovesThatHeadsKeysAlone) {
  const auto model = model_of("decoder", 2);
  const SequenceBatch batch = batch_for(*model);
  const ActivationCache clean = run_with_cache(*model, batch, "blocks.0.attn.hook_?");
  Generator gen(4);
  const Tensor nudge = Tensor::randn({3, 5, 1, 24}, gen, DType::Float64);
  const Hook edit{"blocks.0.hook_k_input", [&](const Tensor& value, const std::string&) {
                    // [B, T, KV, C]: K/V head 1 alone.
                    return value + concat({Tensor::zeros(nudge.shape(), DType::Float64), nudge}, 2);
                  }};
  const ActivationCache edited =
      run_with_cache(*model, batch, "blocks.0.attn.hook_?", {.hooks = {edit}});
  const auto head = [](const Tensor& t, int64_t h) {  // [B, T, heads, D] -> head h
    return narrow(t, 2, h, 1).to_vector();
  };
  const Tensor& k0 = clean.at("blocks.0.attn.hook_k");
  const Tensor& k1 = edited.at("blocks.0.attn.hook_k");
  EXPECT_EQ(k1.shape(), (Shape{3, 5, 2, 6}));
  testing::expect_close(narrow(k1, 2, 0, 1), narrow(k0, 2, 0, 1), {.rtol = 0, .atol = 1e-12},
                        "K/V head 0");
  EXPECT_NE(head(k1, 1), head(k0, 1));
  testing::expect_close(edited.at("blocks.0.attn.hook_q"), clean.at("blocks.0.attn.hook_q"),
                        {.rtol = 0, .atol = 1e-12}, "queries");
}

TEST(SplitInputs, GradientsThroughTheSplitPathMatchCentralDifferences) {
  const auto model = model_of("decoder", 2);
  const SequenceBatch batch = batch_for(*model);
  Generator gen(9);
  // Offsets added at three split inputs: [B, T, H, C], [B, T, KV, C], [B, T, C].
  const std::vector<Tensor> offsets{Tensor::randn({3, 5, 4, 24}, gen, DType::Float64, 0, 0.1),
                                    Tensor::randn({3, 5, 2, 24}, gen, DType::Float64, 0, 0.1),
                                    Tensor::randn({3, 5, 24}, gen, DType::Float64, 0, 0.1)};
  const auto add = [](const Tensor& offset) {
    return [offset](const Tensor& value, const std::string&) { return value + offset; };
  };
  const GradcheckReport report = gradcheck(
      [&](const std::vector<Tensor>& x) {
        return run_with_hooks(*model, batch,
                              {{"blocks.0.hook_q_input", add(x[0])},
                               {"blocks.1.hook_v_input", add(x[1])},
                               {"blocks.0.hook_mlp_in", add(x[2])}});
      },
      // A sample of each offset's elements (GradcheckOptions::elements_per_tensor): every
      // head and position goes through the same code, and the model's own check covers its
      // parameters.
      offsets, {.elements_per_tensor = 64});
  EXPECT_TRUE(report.passed()) << describe(report);
}

TEST(SplitInputs, WrongSplitShapesNameTheInputs) {
  const auto model = model_of("decoder", 2);
  const auto& decoder = dynamic_cast<const DecoderLM&>(*model);
  const Tensor q = Tensor::zeros({1, 5, 4, 24}, DType::Float64);
  const Tensor k = Tensor::zeros({1, 5, 4, 24}, DType::Float64);  // 4 heads, not KV = 2
  try {
    decoder.blocks[0]->attn->forward_split(q, k, k);
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(testing::contains(e.what(), "split inputs q [1,5,4,24], k [1,5,4,24]")) << e.what();
  }
}

}  // namespace test_split_inputs
}  // namespace gradlab::nn
