// Direct logit attribution (interp/direct_logit_attribution.h) on every kind of model it reads:
// the parts sum to the final residual, through the frozen norm and the unembedding to the
// model's logits (1e-12 relative in float64, 1e-5 in float32), the folded view gives the same
// parts' logits, and a post-norm model is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "interp/direct_logit_attribution.h"
#include "nn/hooks.h"
#include "nn/models.h"
#include "tests/test_helpers.h"

namespace gradlab::interp {
namespace test_direct_logit_attribution {

using namespace gradlab::nn;

struct Case {
  std::string name, kind;
  ModelConfig config;
};

ModelConfig base_config() {
  return {.vocab_size = 7,
          .max_len = 9,
          .d_model = 12,
          .num_layers = 2,
          .seed = 3,
          .attention = {.num_heads = 3},
          .feed_forward = {.d_ff = 20}};
}

// The models the attribution must read: each differs from the base in one way.
std::vector<Case> cases() {
  std::vector<Case> out;
  out.push_back({"decoder, LayerNorm", "decoder", base_config()});
  ModelConfig rms = base_config();
  rms.norm.kind = kRmsNorm;
  out.push_back({"decoder, RMSNorm", "decoder", rms});
  ModelConfig grouped = base_config();
  grouped.d_model = 16;
  grouped.attention = {.num_heads = 4, .num_kv_heads = 2};
  out.push_back({"decoder, grouped K/V heads", "decoder", grouped});
  ModelConfig attention_only = base_config();
  attention_only.feed_forward.d_ff = 0;
  out.push_back({"decoder, attention-only", "decoder", attention_only});
  ModelConfig no_final = base_config();
  no_final.norm.final = false;
  out.push_back({"decoder, no final norm", "decoder", no_final});
  ModelConfig tied = base_config();
  tied.embedding = {.learned_positions = false, .tie_embeddings = true};
  out.push_back({"decoder, sinusoidal, tied", "decoder", tied});
  out.push_back({"encoder-decoder", "seq2seq", base_config()});
  return out;
}

std::shared_ptr<SequenceModel> make_model(const Case& c, DType dtype) {
  std::shared_ptr<SequenceModel> model = make_sequence_model(c.kind, c.config);
  model->to(dtype);
  model->eval();
  // Biases start at zero: moved, so that a bias left out (or counted twice) shows.
  Generator gen(11);
  NoGradGuard no_graph;
  for (auto& [name, p] : model->named_parameters()) {
    const std::vector<double> moved =
        (p + Tensor::randn(p.shape(), gen, dtype, 0.0, 0.2)).to_vector();
    if (dtype == DType::Float64) {
      std::copy(moved.begin(), moved.end(), p.mutable_data<double>());
    } else {
      std::transform(moved.begin(), moved.end(), p.mutable_data<float>(),
                     [](double v) { return static_cast<float>(v); });
    }
  }
  return model;
}

// Two samples [B = 2, P + 1 + A = 6] with prompts of 2 tokens.
SequenceBatch batch_of(const SequenceModel& model) {
  return model.make_batch(Indices({2, 6}, {1, 2, 0, 1, 2, 3, 4, 5, 0, 4, 5, 6}), 2);
}

double tolerance(DType dtype) {
  return dtype == DType::Float64 ? 1e-12 : 1e-5;
}

// max |a - b| relative to max |b|.
double relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double largest = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    largest = std::max(largest, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return largest / scale;
}

ActivationCache cache_of(const SequenceModel& model, const SequenceBatch& batch,
                         const DecomposeOptions& options = {}) {
  std::vector<std::string> points = decomposition_points(model, options);
  points.push_back(residual_point(model, options.layer));
  points.push_back(residual_point(model, -1));
  const std::set<std::string> wanted(points.begin(), points.end());
  return run_with_cache(
      model, batch,
      HookFilter([wanted](const std::string& n) { return wanted.count(n) > 0; }, "the parts"));
}

template <class F>
void expect_config_error(F&& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no ConfigError: " << part;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

PointReader reader(const ActivationCache& cache) {
  return [&cache](const std::string& name) { return cache.at(name); };
}

// The parts' logits [N, B, T, V] summed over N, plus b_U.
std::vector<double> summed_logits(const ResidualStack& parts, const Unembedding& u) {
  const Tensor per_part = matmul(parts.stack, u.weight);  // [N, B, T, V]
  Tensor total = sum(per_part, {0});
  if (u.bias.defined()) total = total + u.bias;
  return total.to_vector();
}

TEST(DirectLogitAttribution, ThePartsSumToTheFinalResidualAndThroughTheNormToTheLogits) {
  for (const Case& c : cases()) {
    for (const DType dtype : {DType::Float64, DType::Float32}) {
      SCOPED_TRACE(c.name + (dtype == DType::Float64 ? " float64" : " float32"));
      const auto model = make_model(c, dtype);
      const SequenceBatch batch = batch_of(*model);
      const ActivationCache cache = cache_of(*model, batch);
      const ResidualStack parts = decompose_residual(*model, reader(cache));
      const Tensor residual = cache.at(residual_point(*model, -1));
      ASSERT_EQ(parts.labels.size(), static_cast<size_t>(parts.stack.size(0)));
      EXPECT_LT(relative_difference(sum(parts.stack, {0}).to_vector(), residual.to_vector()),
                tolerance(dtype));
      const ResidualStack normed = normalized_parts(*model, parts, residual, -1);
      const bool ln_bias = c.config.norm.final && c.config.norm.kind == kLayerNorm;
      EXPECT_EQ(normed.labels.back() == "ln_final_bias", ln_bias);
      EXPECT_LT(relative_difference(summed_logits(normed, unembedding(*model)),
                                    model->forward(batch).to_vector()),
                tolerance(dtype));
    }
  }
}

TEST(DirectLogitAttribution, TheLabelsNameEveryHeadBiasAndFeedForward) {
  const std::vector<Case> all = cases();
  const auto model = make_model(all.back(), DType::Float64);  // the encoder-decoder
  const ActivationCache cache = cache_of(*model, batch_of(*model));
  const ResidualStack parts = decompose_residual(*model, reader(cache));
  const std::vector<std::string> expected = {"embed",
                                             "pos_embed",
                                             "L0H0",
                                             "L0H1",
                                             "L0H2",
                                             "0_attn_bias",
                                             "L0H0_cross",
                                             "L0H1_cross",
                                             "L0H2_cross",
                                             "0_cross_attn_bias",
                                             "0_mlp_out",
                                             "L1H0",
                                             "L1H1",
                                             "L1H2",
                                             "1_attn_bias",
                                             "L1H0_cross",
                                             "L1H1_cross",
                                             "L1H2_cross",
                                             "1_cross_attn_bias",
                                             "1_mlp_out"};
  EXPECT_EQ(parts.labels, expected);
  // A head's part is its slice of the cached hook_result.
  const Tensor result = cache.at("decoder.1.cross_attn.hook_result");  // [B, T, H, C]
  const Tensor head = narrow(parts.stack, 0, 17, 1);                   // L1H2_cross
  EXPECT_EQ(head.to_vector(), reshape(narrow(result, 2, 2, 1), head.shape()).to_vector());
}

TEST(DirectLogitAttribution, SublayersSumToTheStreamEnteringALayer) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const auto model = make_model(c, DType::Float64);
    const DecomposeOptions options{.layer = 1, .grain = ResidualGrain::Sublayers};
    const ActivationCache cache = cache_of(*model, batch_of(*model), options);
    const ResidualStack parts = decompose_residual(*model, reader(cache), options);
    EXPECT_EQ(parts.labels.front(), "embed");
    EXPECT_EQ(parts.labels.back(), c.config.feed_forward.d_ff ? "0_mlp_out" : "0_attn_out");
    EXPECT_LT(relative_difference(sum(parts.stack, {0}).to_vector(),
                                  cache.at(residual_point(*model, 1)).to_vector()),
              1e-12);
  }
}

TEST(DirectLogitAttribution, TheFrozenNormOfTheWholeStreamIsTheModelsNorm) {
  for (const Case& c : cases()) {
    if (!c.config.norm.final) continue;
    SCOPED_TRACE(c.name);
    const auto model = make_model(c, DType::Float64);
    const SequenceBatch batch = batch_of(*model);
    const ActivationCache cache = cache_of(*model, batch, {.layer = 1});
    // The stream entering block 1 through block 1's ln1, and the final one through ln_f.
    for (const int64_t layer : {int64_t{1}, int64_t{-1}}) {
      const Tensor residual = cache.at(residual_point(*model, layer));
      const ResidualStack whole{{"all"},
                                reshape(residual, {1, 2, residual.size(1), residual.size(2)})};
      const ResidualStack normed = normalized_parts(*model, whole, residual, layer);
      const auto& blocks = c.kind == "decoder"
                               ? std::dynamic_pointer_cast<DecoderLM>(model)->blocks
                               : std::dynamic_pointer_cast<EncoderDecoder>(model)->decoder_blocks;
      const Norm& norm =
          layer == -1
              ? *(c.kind == "decoder" ? std::dynamic_pointer_cast<DecoderLM>(model)->ln_f
                                      : std::dynamic_pointer_cast<EncoderDecoder>(model)->ln_f)
              : *blocks[1]->ln1;
      EXPECT_LT(relative_difference(sum(normed.stack, {0}).to_vector(),
                                    norm.forward(residual).to_vector()),
                1e-12);
    }
  }
}

TEST(DirectLogitAttribution, FoldingTheNormGivesTheSamePartsLogits) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const auto model = make_model(c, DType::Float64);
    const SequenceBatch batch = batch_of(*model);
    const ActivationCache cache = cache_of(*model, batch);
    const ResidualStack parts = decompose_residual(*model, reader(cache));
    const Tensor residual = cache.at(residual_point(*model, -1));
    const ResidualStack plain = normalized_parts(*model, parts, residual, -1, false);
    const ResidualStack folded = normalized_parts(*model, parts, residual, -1, true);
    const Unembedding u = unembedding(*model, false), f = unembedding(*model, true);
    EXPECT_EQ(folded.labels, parts.labels);
    const std::vector<double> a = matmul(plain.stack, u.weight).to_vector();   // [N', B, T, V]
    const std::vector<double> b = matmul(folded.stack, f.weight).to_vector();  // [N, B, T, V]
    EXPECT_LT(relative_difference(std::vector<double>(a.begin(), a.begin() + b.size()), b), 1e-12);
    // What the folded b_U holds is the ln_final_bias part's logits and b_U.
    if (plain.labels.back() == "ln_final_bias") {
      std::vector<double> bias_logits(a.begin() + b.size(), a.end());  // [1, B, T, V]
      const std::vector<double> folded_bias = f.bias.to_vector();
      const size_t V = folded_bias.size();
      if (u.bias.defined()) {  // none with tied embeddings
        const std::vector<double> head_bias = u.bias.to_vector();
        for (size_t i = 0; i < bias_logits.size(); ++i) bias_logits[i] += head_bias[i % V];
      }
      for (size_t i = 0; i < bias_logits.size(); ++i) {
        EXPECT_NEAR(bias_logits[i], folded_bias[i % V], 1e-12);
      }
    }
    EXPECT_LT(relative_difference(summed_logits(folded, f), model->forward(batch).to_vector()),
              1e-12);
  }
}

TEST(DirectLogitAttribution, EachRowsPartsSumToItsLogitAndLogitDifference) {
  for (const Case& c : cases()) {
    for (const DType dtype : {DType::Float64, DType::Float32}) {
      SCOPED_TRACE(c.name + (dtype == DType::Float64 ? " float64" : " float32"));
      const auto model = make_model(c, dtype);
      const SequenceBatch batch = batch_of(*model);
      const Tensor logits = model->forward(batch);  // [B, T, V]
      const int64_t T = logits.size(1), V = logits.size(2);
      for (const DlaOptions& options :
           {DlaOptions{}, DlaOptions{.position = 1, .answer = 3, .versus = 5},
            DlaOptions{.versus = 0, .fold_ln = true}}) {
        const DlaRows rows = direct_logit_attribution(*model, batch, options);
        const size_t N = rows.labels.size();
        ASSERT_EQ(rows.contributions.size(), 2 * N);
        for (size_t r = 0; r < 2; ++r) {
          const int64_t p = options.position >= 0 ? options.position
                            : c.kind == "decoder" ? 2
                                                  : 0;  // the answer's first position
          EXPECT_EQ(rows.positions[r], p);
          const int64_t token =
              options.answer >= 0 ? options.answer : batch.targets.values[r * T + p];
          EXPECT_EQ(rows.answers[r], token);
          const std::vector<double> l = logits.to_vector();
          const size_t at = (r * T + p) * V;
          const double expected =
              l[at + token] - (options.versus >= 0 ? l[at + options.versus] : 0.0);
          double total = 0, magnitude = 1;  // float32 rounding grows with the parts' sizes
          for (size_t n = 0; n < N; ++n) {
            total += rows.contributions[r * N + n];
            magnitude += std::abs(rows.contributions[r * N + n]);
          }
          EXPECT_NEAR(total, expected, tolerance(dtype) * magnitude);
          EXPECT_NEAR(rows.logits[r], expected, tolerance(dtype) * magnitude);
        }
      }
    }
  }
}

TEST(DirectLogitAttribution, TheSummaryIsTheMeanAndDeviationOfTheRowsInAnyBatches) {
  const auto model = make_model(cases().front(), DType::Float64);
  const SequenceModel& m = *model;
  const SequenceBatch batch =
      m.make_batch(Indices({3, 6}, {1, 2, 0, 1, 2, 3, 4, 5, 0, 4, 5, 6, 6, 3, 0, 2, 2, 1}), 2);
  const DlaRows rows = direct_logit_attribution(m, batch, {});
  const DlaSummary whole = summarize_dla(m, batch, {}, -1, 3);
  const DlaSummary streamed = summarize_dla(m, batch, {}, -1, 2);
  const size_t N = rows.labels.size();
  ASSERT_EQ(whole.rows, 3);
  for (size_t n = 0; n < N; ++n) {
    const double a = rows.contributions[n], b = rows.contributions[N + n],
                 c = rows.contributions[2 * N + n];
    const double mean = (a + b + c) / 3;
    const double std = std::sqrt(
        ((a - mean) * (a - mean) + (b - mean) * (b - mean) + (c - mean) * (c - mean)) / 3);
    EXPECT_NEAR(whole.mean[n], mean, 1e-12);
    EXPECT_NEAR(streamed.mean[n], mean, 1e-12);
    EXPECT_NEAR(whole.std[n], std, 1e-12);
    EXPECT_NEAR(streamed.std[n], std, 1e-12);
  }
  EXPECT_NEAR(whole.logit_mean, (rows.logits[0] + rows.logits[1] + rows.logits[2]) / 3, 1e-12);
  const DlaSummary first = summarize_dla(m, batch, {}, 1);
  EXPECT_EQ(first.rows, 1);
  EXPECT_NEAR(first.mean[0], rows.contributions[0], 1e-12);
  expect_config_error([&] { summarize_dla(m, batch, {}, 4); }, "4 rows is not in [1, 3]");
}

TEST(DirectLogitAttribution, RefusesAPostNormModelAndBadPositionsOrTokens) {
  ModelConfig post = base_config();
  post.block.pre_norm = false;
  const auto model = make_model({"post-norm", "decoder", post}, DType::Float64);
  const SequenceBatch batch = batch_of(*model);
  expect_config_error([&] { direct_logit_attribution(*model, batch, {}); },
                      "a post-norm model's residual stream is not a sum of its parts");
  const auto pre = make_model(cases().front(), DType::Float64);
  expect_config_error([&] { direct_logit_attribution(*pre, batch, {.position = 5}); },
                      "position 5 is not in [0, 5)");
  expect_config_error([&] { direct_logit_attribution(*pre, batch, {.answer = 7}); },
                      "answer 7 is not a token");
  expect_config_error([&] { direct_logit_attribution(*pre, batch, {.position = 0}); },
                      "has no target");
  expect_config_error([&] { residual_point(*pre, 3); }, "layer 3 is not in [-1, 2]");
}

}  // namespace test_direct_logit_attribution
}  // namespace gradlab::interp
