// The PyTorch reference fixture (tests/fixtures/reference.h5) is readable and self-consistent:
// the expected cases are present, every shape follows from the case's attributes, and the
// stored attention weights are distributions that respect the masks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "tests/reference.h"

namespace gradlab::testing {
namespace test_reference_reader {

const Reference& reference() {
  static const Reference ref(reference_path());
  return ref;
}

bool is_mask_name(const std::string& name) {
  return name.find("mask") != std::string::npos;
}

// Sizes of one case, read off its inputs.
struct CaseDims {
  int64_t batch = 0, tq = 0, tk = 0, channels = 0;
};

CaseDims case_dims(const std::string& name) {
  const Reference& ref = reference();
  CaseDims dims;
  const bool self = ref.attr_int(name, "self_attention") == 1;
  const Tensor query = ref.tensor(name + (self ? "/inputs/x" : "/inputs/query"), DType::Float64);
  const Tensor key_value =
      ref.tensor(name + (self ? "/inputs/x" : "/inputs/key_value"), DType::Float64);
  EXPECT_EQ(query.rank(), 3) << name;
  EXPECT_EQ(key_value.rank(), 3) << name;
  dims.batch = query.size(0);
  dims.tq = query.size(1);
  dims.channels = query.size(2);
  dims.tk = key_value.size(1);
  EXPECT_EQ(key_value.size(0), dims.batch) << name;
  EXPECT_EQ(key_value.size(2), dims.channels) << name;
  return dims;
}

std::map<std::string, Shape> expected_param_shapes(const std::string& name, int64_t channels) {
  const Reference& ref = reference();
  const int64_t heads = ref.attr_int(name, "num_heads");
  const int64_t kv_heads = ref.attr_int(name, "num_kv_heads");
  const int64_t head_dim = channels / heads;
  const bool block = ref.attr_string(name, "kind") == "block";
  const std::string attn = block ? "attn." : "";
  std::map<std::string, Shape> shapes = {
      {attn + "q_proj.weight", {heads * head_dim, channels}},
      {attn + "q_proj.bias", {heads * head_dim}},
      {attn + "k_proj.weight", {kv_heads * head_dim, channels}},
      {attn + "k_proj.bias", {kv_heads * head_dim}},
      {attn + "v_proj.weight", {kv_heads * head_dim, channels}},
      {attn + "v_proj.bias", {kv_heads * head_dim}},
      {attn + "out_proj.weight", {channels, heads * head_dim}},
      {attn + "out_proj.bias", {channels}},
  };
  if (block) {
    const int64_t d_ff = ref.attr_int(name, "d_ff");
    shapes["ln1.weight"] = shapes["ln1.bias"] = shapes["ln2.weight"] =
        shapes["ln2.bias"] = {channels};
    shapes["ffn.fc1.weight"] = {d_ff, channels};
    shapes["ffn.fc1.bias"] = {d_ff};
    shapes["ffn.fc2.weight"] = {channels, d_ff};
    shapes["ffn.fc2.bias"] = {channels};
  }
  return shapes;
}

std::vector<std::string> keys(const std::map<std::string, Shape>& shapes) {
  std::vector<std::string> out;
  for (const auto& [key, shape] : shapes) out.push_back(key);
  return out;
}

TEST(ReferenceReader, ListsTheSixCases) {
  std::vector<std::string> cases = reference().cases();
  std::sort(cases.begin(), cases.end());
  EXPECT_EQ(cases, (std::vector<std::string>{"block_pre_ln_causal", "mha_cross", "mha_gqa",
                                             "mha_mqa", "mha_self", "mha_self_causal_padding"}));
}

TEST(ReferenceReader, AttributesDescribeTheCases) {
  const Reference& ref = reference();
  for (const std::string& name : ref.cases()) {
    SCOPED_TRACE(name);
    const std::string kind = ref.attr_string(name, "kind");
    EXPECT_TRUE(kind == "mha" || kind == "block") << kind;
    EXPECT_EQ(kind, name.starts_with("block") ? "block" : "mha");
    const int64_t heads = ref.attr_int(name, "num_heads");
    const int64_t kv_heads = ref.attr_int(name, "num_kv_heads");
    ASSERT_GT(kv_heads, 0);
    EXPECT_EQ(heads % kv_heads, 0);
    EXPECT_TRUE(ref.attr_int(name, "causal") == 0 || ref.attr_int(name, "causal") == 1);
    EXPECT_TRUE(ref.attr_int(name, "self_attention") == 0 ||
                ref.attr_int(name, "self_attention") == 1);
    EXPECT_EQ(ref.attr_int(name, "d_ff") > 0, kind == "block");
  }
  EXPECT_EQ(ref.attr_int("mha_gqa", "num_heads"), 4);
  EXPECT_EQ(ref.attr_int("mha_gqa", "num_kv_heads"), 2);
  EXPECT_EQ(ref.attr_int("mha_mqa", "num_kv_heads"), 1);
  EXPECT_EQ(ref.attr_int("mha_cross", "self_attention"), 0);
  EXPECT_EQ(ref.attr_int("mha_self_causal_padding", "causal"), 1);
}

TEST(ReferenceReader, ShapesFollowTheAttributes) {
  const Reference& ref = reference();
  for (const std::string& name : ref.cases()) {
    SCOPED_TRACE(name);
    const CaseDims dims = case_dims(name);
    const Shape out_shape = {dims.batch, dims.tq, dims.channels};
    const bool mha = ref.attr_string(name, "kind") == "mha";
    const int64_t heads = ref.attr_int(name, "num_heads");
    EXPECT_EQ(dims.channels % heads, 0);

    EXPECT_EQ(ref.tensor(name + "/inputs/upstream", DType::Float64).shape(), out_shape);
    EXPECT_EQ(ref.tensor(name + "/outputs/output", DType::Float64).shape(), out_shape);
    if (mha) {
      EXPECT_EQ(ref.tensor(name + "/outputs/attn_weights", DType::Float64).shape(),
                (Shape{dims.batch, heads, dims.tq, dims.tk}));
    } else {
      EXPECT_FALSE(ref.has(name + "/outputs/attn_weights"));
    }
    if (ref.has(name + "/inputs/key_padding_mask")) {
      EXPECT_EQ(ref.mask(name + "/inputs/key_padding_mask").shape, (Shape{dims.batch, dims.tk}));
    }

    // Parameters and their gradients: exactly the expected names, with the expected shapes.
    const std::map<std::string, Shape> shapes = expected_param_shapes(name, dims.channels);
    EXPECT_EQ(ref.names(name + "/params"), keys(shapes));
    EXPECT_EQ(ref.names(name + "/grads/params"), keys(shapes));
    for (const auto& [param, shape] : shapes) {
      EXPECT_EQ(ref.tensor(name + "/params/" + param, DType::Float64).shape(), shape) << param;
      EXPECT_EQ(ref.tensor(name + "/grads/params/" + param, DType::Float64).shape(), shape)
          << param;
    }

    // One input gradient per differentiable input, shaped like it.
    std::vector<std::string> differentiable;
    for (const std::string& input : ref.names(name + "/inputs")) {
      if (!is_mask_name(input) && input != "upstream") differentiable.push_back(input);
    }
    const std::vector<std::string> expected_inputs =
        ref.attr_int(name, "self_attention") == 1 ? std::vector<std::string>{"x"}
                                                  : std::vector<std::string>{"key_value", "query"};
    EXPECT_EQ(differentiable, expected_inputs);
    EXPECT_EQ(ref.names(name + "/grads/inputs"), differentiable);
    for (const std::string& input : differentiable) {
      EXPECT_EQ(ref.tensor(name + "/grads/inputs/" + input, DType::Float64).shape(),
                ref.tensor(name + "/inputs/" + input, DType::Float64).shape())
          << input;
    }
  }
}

TEST(ReferenceReader, AttentionWeightsAreMaskedDistributions) {
  const Reference& ref = reference();
  for (const std::string& name : ref.cases()) {
    if (ref.attr_string(name, "kind") != "mha") continue;
    SCOPED_TRACE(name);
    const Tensor weights = ref.tensor(name + "/outputs/attn_weights", DType::Float64);
    ASSERT_EQ(weights.rank(), 4);
    const int64_t batch = weights.size(0), heads = weights.size(1);
    const int64_t tq = weights.size(2), tk = weights.size(3);
    const bool causal = ref.attr_int(name, "causal") == 1;
    const std::string mask_path = name + "/inputs/key_padding_mask";
    const Mask padding = ref.has(mask_path) ? ref.mask(mask_path)
                                            : Mask({batch, tk}, std::vector<uint8_t>(batch * tk));
    int64_t masked_count = 0;
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t i = 0; i < tq; ++i) {
          double sum = 0.0;
          bool any_visible = false;
          for (int64_t j = 0; j < tk; ++j) {
            const bool masked = (causal && j > i) || padding.values[b * tk + j] != 0;
            const double w = weights.at({b, h, i, j});
            if (masked) {
              EXPECT_EQ(w, 0.0) << "b=" << b << " h=" << h << " i=" << i << " j=" << j;
              ++masked_count;
            } else {
              EXPECT_GT(w, 0.0) << "b=" << b << " h=" << h << " i=" << i << " j=" << j;
              any_visible = true;
            }
            sum += w;
          }
          if (any_visible) {
            EXPECT_NEAR(sum, 1.0, 1e-12) << "b=" << b << " h=" << h << " i=" << i;
          }
        }
      }
    }
    EXPECT_EQ(masked_count > 0, causal || ref.has(mask_path));
  }
}

TEST(ReferenceReader, PaddingMasksMarkTrailingKeys) {
  const Reference& ref = reference();
  const Mask causal_padding = ref.mask("mha_self_causal_padding/inputs/key_padding_mask");
  EXPECT_EQ(causal_padding.values, (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 0, 0, 1, 1}));
  const Mask cross = ref.mask("mha_cross/inputs/key_padding_mask");
  EXPECT_EQ(cross.values, (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_TRUE(ref.has("block_pre_ln_causal/inputs/key_padding_mask"));
  EXPECT_FALSE(ref.has("mha_self/inputs/key_padding_mask"));
}

TEST(ReferenceReader, ReadsBothDtypesAndReportsMissingPaths) {
  const Reference& ref = reference();
  const std::string path = "block_pre_ln_causal/params/attn.q_proj.weight";
  const Tensor f64 = ref.tensor(path, DType::Float64);
  const Tensor f32 = ref.tensor(path, DType::Float32);
  EXPECT_EQ(f64.dtype(), DType::Float64);
  EXPECT_EQ(f32.dtype(), DType::Float32);
  EXPECT_FALSE(f32.requires_grad());
  EXPECT_TRUE(allclose(f32, f64, 0.0, 1e-6));

  EXPECT_TRUE(ref.has("mha_self"));
  EXPECT_TRUE(ref.has(path));
  EXPECT_FALSE(ref.has("mha_self/params/nope.weight"));
  EXPECT_FALSE(ref.has("no_such_case/params/q_proj.weight"));
  EXPECT_THROW(ref.tensor("mha_self/params/nope.weight", DType::Float32), std::runtime_error);
  EXPECT_THROW(ref.tensor("mha_self/params", DType::Float32), std::runtime_error);
  EXPECT_THROW(ref.mask("mha_self/inputs/x"), std::runtime_error);
  EXPECT_THROW(ref.attr_int("mha_self", "kind"), std::runtime_error);
  EXPECT_THROW(ref.attr_int("mha_self", "missing"), std::runtime_error);
  EXPECT_THROW(ref.names("mha_self/inputs/x"), std::runtime_error);
  EXPECT_THROW(Reference("no/such/file.h5"), std::runtime_error);
}

}  // namespace test_reference_reader
}  // namespace gradlab::testing
