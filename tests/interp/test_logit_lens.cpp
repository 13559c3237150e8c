// The logit lens (interp/logit_lens.h): its last layer is the model's logits bit for bit, each
// layer is unembed of the cached residual, and each layer is read with LayerNorm statistics of
// its own residual, not the final layer's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "interp/logit_lens.h"
#include "nn/hooks.h"
#include "nn/models.h"
#include "tests/test_helpers.h"

namespace gradlab::interp {
namespace test_logit_lens {

// The instruments' tests build and run models of nn/ throughout.
using namespace gradlab::nn;

ModelConfig lens_config(bool pre_norm = true) {
  return {.vocab_size = 7,
          .max_len = 9,
          .d_model = 12,
          .num_layers = 3,
          .seed = 5,
          .attention = {.num_heads = 3},
          .feed_forward = {.d_ff = 20},
          .block = {.pre_norm = pre_norm}};
}

std::shared_ptr<SequenceModel> lens_model(const std::string& kind, DType dtype,
                                          const ModelConfig& config = lens_config()) {
  std::shared_ptr<SequenceModel> model = make_sequence_model(kind, config);
  model->to(dtype);
  model->eval();
  return model;
}

// Two samples [B = 2, P + 1 + A = 6] with prompts of 2 tokens.
SequenceBatch lens_batch(const SequenceModel& model) {
  return model.make_batch(Indices({2, 6}, {1, 2, 0, 1, 2, 3, 4, 5, 0, 4, 5, 6}), 2);
}

bool same_values(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.to_vector() == b.to_vector();
}

double max_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double largest = 0;
  for (size_t i = 0; i < a.size(); ++i) largest = std::max(largest, std::abs(a[i] - b[i]));
  return largest;
}

TEST(LogitLens, TheLastLayerIsTheModelsLogitsBitForBit) {
  struct Case {
    std::string kind;
    DType dtype;
    bool pre_norm;
  };
  for (const Case& c :
       {Case{"decoder", DType::Float32, true}, Case{"decoder", DType::Float64, true},
        Case{"seq2seq", DType::Float32, true}, Case{"seq2seq", DType::Float64, true},
        Case{"decoder", DType::Float32, false}, Case{"seq2seq", DType::Float64, false}}) {
    SCOPED_TRACE(c.kind + (c.dtype == DType::Float64 ? " float64" : " float32") +
                 (c.pre_norm ? " pre-LN" : " post-LN"));
    const auto model = lens_model(c.kind, c.dtype, lens_config(c.pre_norm));
    const SequenceBatch batch = lens_batch(*model);
    const std::vector<LensLayer> lens = logit_lens(*model, batch);
    ASSERT_EQ(lens.size(), 4u);
    const std::string stack = c.kind == "decoder" ? "blocks." : "decoder.";
    EXPECT_EQ(lens[0].name, "embed");
    for (size_t i = 1; i < lens.size(); ++i) EXPECT_EQ(lens[i].name, stack + std::to_string(i - 1));
    EXPECT_TRUE(same_values(lens.back().logits, model->forward(batch)));
    EXPECT_EQ(lens.back().logits.shape(), (Shape{2, batch.inputs.shape[1], 7}));
  }
}

TEST(LogitLens, EachLayerIsUnembedOfTheCachedResidual) {
  for (const std::string kind : {"decoder", "seq2seq"}) {
    SCOPED_TRACE(kind);
    const auto model = lens_model(kind, DType::Float32);
    const SequenceBatch batch = lens_batch(*model);
    const std::vector<LensLayer> lens = logit_lens(*model, batch);
    const std::string stack = kind == "decoder" ? "blocks." : "decoder.";
    const ActivationCache cache =
        run_with_cache(*model, batch, stack + "*.hook_resid_*", {.logits = false});
    EXPECT_TRUE(same_values(lens[0].logits, model->unembed(cache.at(stack + "0.hook_resid_pre"))));
    for (size_t i = 1; i < lens.size(); ++i) {
      const Tensor residual = cache.at(stack + std::to_string(i - 1) + ".hook_resid_post");
      EXPECT_TRUE(same_values(lens[i].logits, model->unembed(residual))) << i;
    }
    // The layers differ: each reads a residual of its own.
    EXPECT_FALSE(same_values(lens[1].logits, lens[2].logits));
  }
}

// ln_f and the head on one residual [B, T, C] by hand in float64, each row normalized with the
// mean and variance of the row at the same place in `statistics` (the residual itself for the
// logit lens).
std::vector<double> unembed_by_hand(const DecoderLM& model, const std::vector<double>& residual,
                                    const std::vector<double>& statistics) {
  const size_t width = static_cast<size_t>(model.config().d_model);
  const size_t vocab = static_cast<size_t>(model.config().vocab_size);
  const auto& ln_f = dynamic_cast<const LayerNorm&>(*model.ln_f);
  const std::vector<double> gain = ln_f.weight.to_vector();
  const std::vector<double> shift = ln_f.bias.to_vector();
  const std::vector<double> head = model.head->weight.to_vector();  // [V, C]
  const std::vector<double> head_bias = model.head->bias.to_vector();
  std::vector<double> logits;
  for (size_t row = 0; row < residual.size() / width; ++row) {
    const auto stats = statistics.begin() + static_cast<std::ptrdiff_t>(row * width);
    double mean = 0, variance = 0;
    for (size_t c = 0; c < width; ++c) mean += stats[c] / static_cast<double>(width);
    for (size_t c = 0; c < width; ++c) {
      variance += (stats[c] - mean) * (stats[c] - mean) / static_cast<double>(width);
    }
    std::vector<double> normalized(width);
    for (size_t c = 0; c < width; ++c) {
      normalized[c] =
          (residual[row * width + c] - mean) / std::sqrt(variance + ln_f.eps) * gain[c] + shift[c];
    }
    for (size_t v = 0; v < vocab; ++v) {
      double sum = head_bias[v];
      for (size_t c = 0; c < width; ++c) sum += normalized[c] * head[v * width + c];
      logits.push_back(sum);
    }
  }
  return logits;
}

TEST(LogitLens, EachLayerIsNormalizedWithItsOwnStatistics) {
  const auto model = lens_model("decoder", DType::Float64);
  const auto& decoder = dynamic_cast<const DecoderLM&>(*model);
  const SequenceBatch batch = lens_batch(*model);
  const std::vector<LensLayer> lens = logit_lens(*model, batch);
  const ActivationCache cache =
      run_with_cache(*model, batch, "blocks.*.hook_resid_post", {.logits = false});
  const std::vector<double> first = cache.at("blocks.0.hook_resid_post").to_vector();
  const std::vector<double> last = cache.at("blocks.2.hook_resid_post").to_vector();
  const std::vector<double> ours = lens[1].logits.to_vector();
  EXPECT_LT(max_difference(ours, unembed_by_hand(decoder, first, first)), 1e-12);
  // Layer 0's residual normalized with the last layer's mean and variance reads otherwise.
  EXPECT_GT(max_difference(ours, unembed_by_hand(decoder, first, last)), 1e-3);
}

TEST(LogitLens, AModelOfOnesOwnMustSayHowToUnembed) {
  struct OwnModel : SequenceModel {
    OwnModel() : SequenceModel(ModelConfig{}) {}
    Tensor forward(const SequenceBatch&, AttentionMaps*) const override {
      return Tensor::zeros({1, 1, 1});
    }
  };
  const OwnModel own;
  try {
    own.unembed(Tensor::zeros({1, 1, 4}));
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(testing::contains(e.what(), "residual stream")) << e.what();
  }
}

}  // namespace test_logit_lens
}  // namespace gradlab::interp
