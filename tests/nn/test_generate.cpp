// Generation of running text: the cached (incremental) forward pass equals the whole forward
// pass at every position, cached and uncached generation give the same logits (1e-5) until the
// cache is first rebuilt, and the draws follow temperature and top-k.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "autograd/graph.h"
#include "autograd/shape_ops.h"
#include "nn/generate.h"
#include "nn/models.h"

namespace gradlab::nn {
namespace test_generate {

// Unequal sizes everywhere, grouped K/V heads, post-LN as well as pre-LN.
ModelConfig small_model(bool pre_norm = true) {
  ModelConfig c;
  c.vocab_size = 11;
  c.max_len = 16;
  c.d_model = 24;
  c.attention = {.num_heads = 4, .num_kv_heads = 2};
  c.num_layers = 2;
  c.feed_forward.d_ff = 40;
  c.block.pre_norm = pre_norm;
  c.seed = 5;
  return c;
}

float max_difference(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  EXPECT_EQ(x.size(), y.size());
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  return static_cast<float>(worst);
}

TEST(Generate, IncrementalForwardEqualsTheWholeForwardPass) {
  for (const bool pre_norm : {true, false}) {
    SCOPED_TRACE(pre_norm ? "pre-LN" : "post-LN");
    DecoderLM model(small_model(pre_norm));
    model.eval();
    NoGradGuard no_grad;
    const std::vector<int64_t> tokens{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9};
    const Tensor whole = model.forward(Indices({1, 13}, tokens));  // [1, 13, V]
    // Read in pieces of 4, 1, 5 and 3 tokens.
    GenerationCache cache;
    std::vector<Tensor> pieces;
    size_t read = 0;
    for (const size_t piece : {4, 1, 5, 3}) {
      pieces.push_back(model.forward_incremental(
          Indices({1, static_cast<int64_t>(piece)},
                  std::vector<int64_t>(tokens.begin() + read, tokens.begin() + read + piece)),
          cache));
      read += piece;
    }
    EXPECT_EQ(cache.length, 13);
    EXPECT_LE(max_difference(concat(pieces, 1), whole), 1e-5f);
  }
}

TEST(Generate, CachedAndUncachedGiveTheSameLogitsUntilTheCacheIsRebuilt) {
  DecoderLM model(small_model());
  const std::vector<int64_t> prompt{2, 7, 1, 8, 2};
  SamplingOptions options;
  options.tokens = 11;  // 5 + 11 = 16 = context: no rebuild
  options.temperature = 0;
  std::vector<std::vector<float>> cached, uncached;
  const auto with_cache =
      generate(model, 16, prompt, options,
               [&](int64_t, const std::vector<float>& l) { cached.push_back(l); });
  options.use_cache = false;
  const auto without =
      generate(model, 16, prompt, options,
               [&](int64_t, const std::vector<float>& l) { uncached.push_back(l); });
  EXPECT_EQ(with_cache, without);
  ASSERT_EQ(cached.size(), 11u);
  for (size_t step = 0; step < cached.size(); ++step) {
    for (size_t v = 0; v < cached[step].size(); ++v) {
      EXPECT_NEAR(cached[step][v], uncached[step][v], 1e-5) << "step " << step << " token " << v;
    }
  }
  EXPECT_TRUE(model.is_training()) << "generate must give the model back in its own mode";
}

TEST(Generate, ALongPromptKeepsItsLastContextTokensAndLongOutputsRebuildTheCache) {
  DecoderLM model(small_model());
  std::vector<int64_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(i % 11);
  SamplingOptions options;
  options.tokens = 50;  // well past the 16 positions: rebuilt several times
  options.temperature = 0;
  std::vector<float> first_cached, first_uncached;
  const auto cached = generate(model, 16, prompt, options, [&](int64_t, const auto& l) {
    if (first_cached.empty()) first_cached = l;
  });
  options.use_cache = false;
  generate(model, 16, prompt, options, [&](int64_t, const auto& l) {
    if (first_uncached.empty()) first_uncached = l;
  });
  EXPECT_EQ(cached.size(), 50u);
  for (size_t v = 0; v < first_cached.size(); ++v) {
    EXPECT_NEAR(first_cached[v], first_uncached[v], 1e-5);
  }
  // The last 16 prompt tokens alone give the same first logits: earlier ones are not read.
  std::vector<float> last_only;
  options.tokens = 1;
  generate(model, 16, std::vector<int64_t>(prompt.end() - 16, prompt.end()), options,
           [&](int64_t, const auto& l) { last_only = l; });
  EXPECT_EQ(last_only, first_uncached);
}

TEST(Generate, GreedyTopKAndTemperature) {
  Generator gen(1);
  SamplingOptions greedy;
  greedy.temperature = 0;
  EXPECT_EQ(sample_token({0.5f, 2.0f, 2.0f, -1.0f}, greedy, gen), 1);  // the first maximum
  SamplingOptions top1;
  top1.top_k = 1;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sample_token({0.1f, 0.3f, 0.2f}, top1, gen), 1);
  // Frequencies follow softmax(logits / T); top-2 never draws the third.
  SamplingOptions hot;
  hot.temperature = 2.0;
  hot.top_k = 2;
  const std::vector<float> logits{1.0f, 0.0f, -3.0f};
  std::map<int64_t, int> counts;
  for (int i = 0; i < 20000; ++i) ++counts[sample_token(logits, hot, gen)];
  EXPECT_EQ(counts[2], 0);
  const double p0 = 1 / (1 + std::exp(-0.5));  // e^(1/2) / (e^(1/2) + e^0)
  EXPECT_NEAR(counts[0] / 20000.0, p0, 0.015);
}

TEST(Generate, TheEncoderDecoderCannotGenerateRunningText) {
  EncoderDecoder model(small_model());
  SamplingOptions options;
  EXPECT_THROW(generate(model, 16, {1, 2}, options), ConfigError);
  EXPECT_THROW(generate(model, 16, {}, options), ConfigError);
}

}  // namespace test_generate
}  // namespace gradlab::nn
