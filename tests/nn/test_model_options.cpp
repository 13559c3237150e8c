// The model options: the decoder's GPT-style ones (no biases, the head tied to the token
// embedding, the gpt2 initialisation) and the toy-transformer ones (attention-only blocks with
// d_ff = 0, norm "none", a ReLU feed-forward): the parameters and hook points each leaves, and
// what each computes. Their gradients are checked with the module checks (nn/module_checks.cpp).
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/error.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "nn/hooks.h"
#include "nn/models.h"

namespace gradlab::nn {
namespace test_model_options {

ModelConfig config(bool bias, bool tied, const std::string& init) {
  ModelConfig c;
  c.vocab_size = 13;
  c.max_len = 9;
  c.d_model = 64;
  c.attention.num_heads = 4;
  c.num_layers = 4;
  c.feed_forward.d_ff = 256;
  c.bias = bias;
  c.embedding.tie_embeddings = tied;
  c.init = init;
  return c;
}

double standard_deviation(const Tensor& t) {
  const std::vector<double> v = t.to_vector();
  double mean = 0, square = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (double x : v) square += (x - mean) * (x - mean);
  return std::sqrt(square / static_cast<double>(v.size()));
}

TEST(ModelOptions, WithoutBiasesAndWithATiedHeadThoseParametersDoNotExist) {
  DecoderLM plain(config(true, false, "default"));
  EXPECT_NO_THROW(plain.parameter("head.weight"));
  EXPECT_NO_THROW(plain.parameter("blocks.0.ffn.fc1.bias"));
  EXPECT_NO_THROW(plain.parameter("ln_f.bias"));
  DecoderLM gpt(config(false, true, "default"));
  for (const auto& [name, parameter] : gpt.named_parameters()) {
    EXPECT_FALSE(name.ends_with(".bias")) << name;
    EXPECT_FALSE(name.starts_with("head.")) << name;
  }
  EXPECT_EQ(plain.num_parameters() - gpt.num_parameters(),
            64 * 13 + 13 +                          // head weight and bias
                4 * (4 * 64 + 256 + 64 + 2 * 64) +  // per block: q, k, v, o, fc1, fc2, ln1, ln2
                64);                                // ln_f
}

// Tied: the logit of token v is h . E[v], so changing E[v] moves logit v even where v is not
// read. Untied, an embedding row of a token nobody reads changes nothing.
TEST(ModelOptions, TheTiedHeadReadsTheTokenEmbedding) {
  for (const bool tied : {true, false}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    DecoderLM model(config(true, tied, "default"));
    NoGradGuard no_grad;
    const Indices tokens({1, 4}, {1, 2, 3, 4});  // token 12 is never read
    const std::vector<double> before = model.forward(tokens).to_vector();
    Tensor embedding = model.embed->token_embedding->weight;
    embedding.mutable_data<float>()[12 * 64] += 1.0f;
    const std::vector<double> after = model.forward(tokens).to_vector();
    bool logit_12_moved = false, others_moved = false;
    for (size_t i = 0; i < before.size(); ++i) {
      const bool moved = before[i] != after[i];
      (i % 13 == 12 ? logit_12_moved : others_moved) |= moved;
    }
    EXPECT_EQ(logit_12_moved, tied);
    EXPECT_FALSE(others_moved);
  }
}

TEST(ModelOptions, Gpt2InitialisationScalesTheResidualProjections) {
  DecoderLM model(config(true, false, "gpt2"));
  const double residual = 0.02 / std::sqrt(8.0);  // 2 * 4 layers
  for (const auto& [name, parameter] : model.named_parameters()) {
    SCOPED_TRACE(name);
    if (name.find("ln") != std::string::npos) {
      for (double x : parameter.to_vector()) EXPECT_EQ(x, name.ends_with("weight") ? 1.0 : 0.0);
    } else if (parameter.rank() == 1) {
      for (double x : parameter.to_vector()) EXPECT_EQ(x, 0.0);
    } else {
      const bool scaled = name.ends_with("out_proj.weight") || name.ends_with("fc2.weight");
      EXPECT_NEAR(standard_deviation(parameter), scaled ? residual : 0.02,
                  (scaled ? residual : 0.02) * 0.1);
    }
  }
  EXPECT_THROW(DecoderLM(config(true, false, "xavier")), ConfigError);
}

TEST(ModelOptions, TransformerLensInitialisationDrawsEveryMatrixAtOneScale) {
  DecoderLM model(config(true, false, "transformerlens"));
  const double expected = 0.8 / std::sqrt(static_cast<double>(model.config().d_model));
  int matrices = 0;
  for (const auto& [name, parameter] : model.named_parameters()) {
    SCOPED_TRACE(name);
    if (name.find("ln") != std::string::npos) {
      for (double x : parameter.to_vector()) EXPECT_EQ(x, name.ends_with("weight") ? 1.0 : 0.0);
    } else if (parameter.rank() == 1) {
      for (double x : parameter.to_vector()) EXPECT_EQ(x, 0.0);
    } else {
      ++matrices;  // the embeddings and the head included
      EXPECT_NEAR(standard_deviation(parameter), expected, expected * 0.1);
    }
  }
  EXPECT_GT(matrices, 4);
}

// A 1-layer decoder as Nanda et al.'s and Olsson et al.'s toy models are: V 7, T 6, C 12, H 3,
// F 20.
ModelConfig toy(int64_t d_ff, const std::string& norm, const std::string& activation = kGelu) {
  return {.vocab_size = 7,
          .max_len = 6,
          .d_model = 12,
          .num_layers = 1,
          .attention = {.num_heads = 3},
          .norm = {.kind = norm},
          .feed_forward = {.d_ff = d_ff, .activation = activation}};
}

std::vector<std::string> parameter_names(const Module& model) {
  std::vector<std::string> names;
  for (const auto& [name, parameter] : model.named_parameters()) names.push_back(name);
  return names;
}

std::vector<std::string> hook_names(const SequenceModel& model) {
  const Indices samples({1, 6}, {1, 2, 0, 3, 4, 5});
  std::vector<std::string> names;
  for (const HookPointInfo& point : hook_points(model, model.make_batch(samples, 2))) {
    names.push_back(point.name);
  }
  return names;
}

const std::vector<std::string> kAttention{
    "blocks.0.attn.q_proj.weight",   "blocks.0.attn.q_proj.bias",   "blocks.0.attn.k_proj.weight",
    "blocks.0.attn.k_proj.bias",     "blocks.0.attn.v_proj.weight", "blocks.0.attn.v_proj.bias",
    "blocks.0.attn.out_proj.weight", "blocks.0.attn.out_proj.bias"};
const std::vector<std::string> kFeedForward{"blocks.0.ffn.fc1.weight", "blocks.0.ffn.fc1.bias",
                                            "blocks.0.ffn.fc2.weight", "blocks.0.ffn.fc2.bias"};

// names, then each of the lists in turn.
std::vector<std::string> joined(std::initializer_list<std::vector<std::string>> lists) {
  std::vector<std::string> all;
  for (const std::vector<std::string>& list : lists)
    all.insert(all.end(), list.begin(), list.end());
  return all;
}

TEST(ModelOptions, EachToyOptionLeavesTheDocumentedParameters) {
  const std::vector<std::string> embed{"embed.token_embedding.weight",
                                       "embed.position_embedding.weight"};
  const std::vector<std::string> head{"head.weight", "head.bias"};
  const std::vector<std::string> ln1{"blocks.0.ln1.weight", "blocks.0.ln1.bias"};
  const std::vector<std::string> ln2{"blocks.0.ln2.weight", "blocks.0.ln2.bias"};
  const std::vector<std::string> ln_f{"ln_f.weight", "ln_f.bias"};
  EXPECT_EQ(parameter_names(DecoderLM(toy(20, kLayerNorm))),
            joined({embed, ln1, kAttention, ln2, kFeedForward, ln_f, head}));
  EXPECT_EQ(parameter_names(DecoderLM(toy(0, kLayerNorm))),
            joined({embed, ln1, kAttention, ln_f, head}));
  EXPECT_EQ(parameter_names(DecoderLM(toy(20, kNoNorm))),
            joined({embed, kAttention, kFeedForward, head}));
  EXPECT_EQ(parameter_names(DecoderLM(toy(0, kNoNorm))), joined({embed, kAttention, head}));
  // The activation has no parameters: ReLU's list is GELU's.
  EXPECT_EQ(parameter_names(DecoderLM(toy(20, kLayerNorm, kRelu))),
            parameter_names(DecoderLM(toy(20, kLayerNorm))));
  // The encoder-decoder's norms: ln1, ln_cross and ln2 in every block, encoder_ln and ln_f.
  for (const auto& [name, parameter] : EncoderDecoder(toy(0, kNoNorm)).named_parameters()) {
    EXPECT_EQ(name.find("ln"), std::string::npos) << name;
    EXPECT_EQ(name.find("ffn"), std::string::npos) << name;
  }
}

TEST(ModelOptions, EachToyOptionLeavesTheDocumentedHookPoints) {
  const std::vector<std::string> attention{
      "blocks.0.attn.hook_q",      "blocks.0.attn.hook_k",       "blocks.0.attn.hook_v",
      "blocks.0.attn.hook_scores", "blocks.0.attn.hook_pattern", "blocks.0.attn.hook_z",
      "blocks.0.attn.hook_result", "blocks.0.hook_attn_out",     "blocks.0.hook_resid_mid"};
  const std::vector<std::string> mlp_in{"blocks.0.hook_mlp_in"};
  const std::vector<std::string> mlp{"blocks.0.ffn.hook_pre", "blocks.0.ffn.hook_post",
                                     "blocks.0.hook_mlp_out"};
  const std::vector<std::string> embed{"embed.hook_token",        "embed.hook_position",
                                       "blocks.0.hook_resid_pre", "blocks.0.hook_attn_in",
                                       "blocks.0.hook_q_input",   "blocks.0.hook_k_input",
                                       "blocks.0.hook_v_input"};
  const std::vector<std::string> logits{"hook_logits"}, post{"blocks.0.hook_resid_post"};
  const std::vector<std::string> ln1{"blocks.0.ln1.hook_normalized"},
      ln2{"blocks.0.ln2.hook_normalized"}, ln_f{"ln_f.hook_normalized"};
  EXPECT_EQ(hook_names(DecoderLM(toy(20, kLayerNorm))),
            joined({embed, ln1, attention, mlp_in, ln2, mlp, post, ln_f, logits}));
  EXPECT_EQ(hook_names(DecoderLM(toy(0, kLayerNorm))),
            joined({embed, ln1, attention, post, ln_f, logits}));
  EXPECT_EQ(hook_names(DecoderLM(toy(20, kNoNorm))),
            joined({embed, attention, mlp_in, mlp, post, logits}));
  EXPECT_EQ(hook_names(DecoderLM(toy(0, kNoNorm))), joined({embed, attention, post, logits}));
}

// Without a norm the block is x + attn(x), then + ffn(x), in both wirings, and the head reads
// the residual stream as it is; an attention-only block stops after the attention sum.
TEST(ModelOptions, WithoutANormTheBlockIsAPlainResidualSum) {
  for (const bool pre_norm : {true, false}) {
    for (const int64_t d_ff : {int64_t{20}, int64_t{0}}) {
      SCOPED_TRACE(std::string(pre_norm ? "pre" : "post") + " d_ff " + std::to_string(d_ff));
      Generator gen(5);
      const TransformerBlock block({.d_model = 12,
                                    .attention = {.num_heads = 3},
                                    .norm = {.kind = kNoNorm},
                                    .feed_forward = {.d_ff = d_ff, .activation = kRelu},
                                    .block = {.pre_norm = pre_norm}},
                                   gen);
      NoGradGuard no_grad;
      const Tensor x = Tensor::randn({2, 5, 12}, gen);  // [B, T, C]
      const Tensor mid = x + block.attn->forward(x);
      const Tensor want = block.ffn ? mid + block.ffn->forward(mid) : mid;
      EXPECT_EQ(block.forward(x).to_vector(), want.to_vector());
    }
  }
  DecoderLM model(toy(0, kNoNorm));
  NoGradGuard no_grad;
  Generator gen(9);
  const Tensor residual = Tensor::randn({1, 4, 12}, gen);  // [B, T, C]
  EXPECT_EQ(model.unembed(residual).to_vector(), model.head->forward(residual).to_vector());
}

// ReLU and GELU differ only between the feed-forward's Linears: hook_post is relu(hook_pre).
TEST(ModelOptions, TheReluFeedForwardAppliesRelu) {
  Generator gen(2);
  const FeedForward relu_ffn(12, {.d_ff = 20, .activation = kRelu}, gen);
  NoGradGuard no_grad;
  const Tensor x = Tensor::randn({2, 5, 12}, gen);  // [B, T, C]
  const Tensor want = relu_ffn.fc2->forward(relu(relu_ffn.fc1->forward(x)));
  EXPECT_EQ(relu_ffn.forward(x).to_vector(), want.to_vector());
  const Tensor as_gelu = relu_ffn.fc2->forward(gelu(relu_ffn.fc1->forward(x)));
  EXPECT_NE(relu_ffn.forward(x).to_vector(), as_gelu.to_vector());
}

TEST(ModelOptions, UnknownOptionsAreConfigErrorsNamingTheRows) {
  const auto message = [](const ModelConfig& config) {
    try {
      DecoderLM model(config);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // The registered rows start with gradlab's own; other tests of this program add theirs.
  const std::string unknown_norm = message(toy(20, "batch"));
  EXPECT_TRUE(unknown_norm.starts_with(
      "norm 'batch' is not registered in this program (registered: layer, none"))
      << unknown_norm;
  EXPECT_NE(unknown_norm.find("rmsnorm"), std::string::npos) << unknown_norm;
  EXPECT_NE(unknown_norm.find("a program registers it with gradlab::nn::register_norm(\"batch\", "
                              "help, factory) before it builds or loads the model"),
            std::string::npos)
      << unknown_norm;
  EXPECT_EQ(message(toy(20, kLayerNorm, "tanh")),
            "unknown activation 'tanh' (expected gelu or relu)");
  EXPECT_EQ(message(toy(0, kLayerNorm, "tanh")),
            "unknown activation 'tanh' (expected gelu or relu)");
  EXPECT_EQ(message(toy(-1, kLayerNorm)),
            "TransformerBlock: d_ff must be positive, or 0 for attention-only blocks, got -1");
}

}  // namespace test_model_options
}  // namespace gradlab::nn
