// gradlab's MultiHeadAttention and TransformerBlock against PyTorch (tests/fixtures/reference.h5):
// outputs, per-head attention weights, and the gradients of every input and parameter, in
// float64 (to 1e-10) and in float32 (to float32 rounding).
#include <gtest/gtest.h>

#include "autograd/ops.h"
#include "nn/transformer.h"
#include "tests/reference.h"
#include "tests/test_helpers.h"

namespace gradlab {
namespace test_attention_reference {

using testing::expect_close;
using testing::Reference;
using testing::reference_path;
using testing::Tolerance;

// float32 keeps 24 bits (relative 6e-8); gradients of size ~20 after a few dozen roundings
// land near 1e-5 absolute, so both bounds are needed.
Tolerance tolerance_for(DType dtype) {
  return dtype == DType::Float64 ? Tolerance{1e-9, 1e-10} : Tolerance{1e-4, 1e-5};
}

// Loads the fixture's parameters into module, after checking that the names agree exactly.
void load_parameters(nn::Module& module, const Reference& ref, const std::string& case_name,
                     DType dtype) {
  module.to(dtype);
  std::vector<std::string> ours;
  for (auto& [name, p] : module.named_parameters()) {
    ours.push_back(name);
    p.copy_from(ref.tensor(case_name + "/params/" + name, dtype));
  }
  std::sort(ours.begin(), ours.end());
  EXPECT_EQ(ours, ref.names(case_name + "/params"));
}

std::optional<Mask> padding_of(const Reference& ref, const std::string& case_name) {
  const std::string path = case_name + "/inputs/key_padding_mask";
  if (!ref.has(path)) return std::nullopt;
  return ref.mask(path);
}

// Runs one case: builds the module, loads weights, runs forward and backward of
// sum(output * upstream), and compares everything the fixture holds.
void check_case(const std::string& case_name, DType dtype) {
  const Reference ref(reference_path());
  const Tolerance tol = tolerance_for(dtype);
  const std::string kind = ref.attr_string(case_name, "kind");
  const bool self = ref.attr_int(case_name, "self_attention") != 0;
  const nn::AttentionConfig attention{
      .d_model = ref.tensor(case_name + "/inputs/upstream", dtype).size(-1),
      .num_heads = ref.attr_int(case_name, "num_heads"),
      .num_kv_heads = ref.attr_int(case_name, "num_kv_heads")};
  nn::AttentionMasks masks;
  masks.causal = ref.attr_int(case_name, "causal") != 0;
  masks.key_padding_mask = padding_of(ref, case_name);

  std::map<std::string, Tensor> inputs;
  for (const std::string& name :
       self ? std::vector<std::string>{"x"} : std::vector<std::string>{"query", "key_value"}) {
    inputs[name] = ref.tensor(case_name + "/inputs/" + name, dtype).set_requires_grad();
  }
  const Tensor& query = self ? inputs["x"] : inputs["query"];
  const Tensor& key_value = self ? inputs["x"] : inputs["key_value"];

  Generator gen(0);
  std::unique_ptr<nn::Module> module;
  Tensor output, weights;
  if (kind == "mha") {
    auto attn = std::make_unique<nn::MultiHeadAttention>(attention, gen);
    load_parameters(*attn, ref, case_name, dtype);
    const nn::AttentionOutput result = attn->forward_with_weights(query, key_value, masks);
    output = result.output;
    weights = result.weights;
    module = std::move(attn);
  } else {
    auto block = std::make_unique<nn::TransformerBlock>(
        nn::ModelConfig{
            .d_model = attention.d_model,
            .attention = {.num_heads = attention.num_heads, .num_kv_heads = attention.num_kv_heads},
            .feed_forward = {.d_ff = ref.attr_int(case_name, "d_ff")}},
        gen);
    load_parameters(*block, ref, case_name, dtype);
    output = block->forward(query, masks);
    module = std::move(block);
  }

  expect_close(output, ref.tensor(case_name + "/outputs/output", dtype), tol, "output");
  if (weights.defined()) {
    expect_close(weights, ref.tensor(case_name + "/outputs/attn_weights", dtype), tol,
                 "attention weights");
  }
  sum(output * ref.tensor(case_name + "/inputs/upstream", dtype)).backward();
  for (const auto& [name, input] : inputs) {
    expect_close(input.grad(), ref.tensor(case_name + "/grads/inputs/" + name, dtype), tol,
                 "gradient of input " + name);
  }
  for (const auto& [name, p] : module->named_parameters()) {
    expect_close(p.grad(), ref.tensor(case_name + "/grads/params/" + name, dtype), tol,
                 "gradient of " + name);
  }
}

class AttentionReference : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

TEST_P(AttentionReference, MatchesPyTorch) {
  check_case(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionReference,
                         ::testing::Combine(::testing::Values("mha_self", "mha_self_causal_padding",
                                                              "mha_cross", "mha_gqa", "mha_mqa",
                                                              "block_pre_ln_causal"),
                                            ::testing::Values(DType::Float64, DType::Float32)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  dtype_name(std::get<1>(info.param));
                         });

TEST(AttentionReference, FixtureListsExactlyTheCasesTested) {
  const Reference ref(reference_path());
  EXPECT_EQ(ref.cases(),
            (std::vector<std::string>{"block_pre_ln_causal", "mha_cross", "mha_gqa", "mha_mqa",
                                      "mha_self", "mha_self_causal_padding"}));
}

}  // namespace test_attention_reference
}  // namespace gradlab
