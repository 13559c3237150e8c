// The decoder's GPT-style options: no biases, the head tied to the token embedding, and the
// gpt2 initialisation (their gradients are checked with the module checks).
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/error.h"
#include "autograd/graph.h"
#include "nn/models.h"

namespace gradlab::nn {
namespace test_model_options {

ModelConfig config(bool bias, bool tied, const std::string& init) {
  ModelConfig c;
  c.vocab_size = 13;
  c.max_len = 9;
  c.d_model = 64;
  c.num_heads = 4;
  c.num_layers = 4;
  c.d_ff = 256;
  c.bias = bias;
  c.tie_embeddings = tied;
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

}  // namespace test_model_options
}  // namespace gradlab::nn
