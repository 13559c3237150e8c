// Head scores (interp/head_scores.h): the scores against run_with_cache's patterns read element by
// element, the exact scores of uniform attention, the tokens drawn, and the errors.
#include <gtest/gtest.h>

#include <limits>
#include <set>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "interp/head_scores.h"
#include "nn/hooks.h"
#include "nn/models.h"
#include "tests/test_helpers.h"

namespace gradlab::interp {
namespace test_head_scores {

// The instruments' tests build and run models of nn/ throughout.
using namespace gradlab::nn;

using testing::contains;

// Unequal sizes, so that a mixed-up axis shows: V = 11, 13 positions (n at most 6), H = 3, D = 4.
ModelConfig unequal_config() {
  return {.vocab_size = 11,
          .max_len = 13,
          .d_model = 12,
          .num_layers = 2,
          .seed = 5,
          .attention = {.num_heads = 3},
          .feed_forward = {.d_ff = 20}};
}

void scale(Tensor tensor, double factor) {
  if (tensor.dtype() == DType::Float32) {
    float* values = tensor.mutable_data<float>();
    for (int64_t i = 0; i < tensor.numel(); ++i) values[i] *= static_cast<float>(factor);
  } else {
    double* values = tensor.mutable_data<double>();
    for (int64_t i = 0; i < tensor.numel(); ++i) values[i] *= factor;
  }
}

// Every query projection of model times factor: 8 sharpens the patterns of a fresh model, whose
// near-uniform weights would give nearly the same value on every diagonal; 0 makes them uniform.
void scale_queries(SequenceModel& model, double factor) {
  for (const auto& [name, parameter] : model.named_parameters()) {
    if (name.find("q_proj.") != std::string::npos) scale(parameter, factor);
  }
}

std::shared_ptr<SequenceModel> model_of(const std::string& kind, DType dtype, double query_scale,
                                        const ModelConfig& config = unequal_config()) {
  std::shared_ptr<SequenceModel> model = make_sequence_model(kind, config);
  model->to(dtype);
  scale_queries(*model, query_scale);
  return model;
}

// What head_scores reads: the tokens as inputs, and as the source of a model that reads one.
SequenceBatch batch_of(const SequenceModel& model, const Indices& tokens) {
  SequenceBatch batch{
      {}, tokens, Indices(tokens.shape, std::vector<int64_t>(tokens.values.size(), kIgnoreTarget))};
  if (model.kind() == "seq2seq") batch.source = tokens;
  return batch;
}

// The mean of pattern[b, h, i, i - offset] over every b and the queries i from first on.
double by_hand(const Tensor& pattern, int64_t head, int64_t offset, int64_t first) {
  double sum = 0;
  int64_t count = 0;
  for (int64_t b = 0; b < pattern.size(0); ++b) {
    for (int64_t i = first; i < pattern.size(2); ++i, ++count) {
      sum += pattern.at({b, head, i, i - offset});
    }
  }
  return sum / static_cast<double>(count);
}

TEST(HeadScores, EqualTheCachedPatternsReadByHand) {
  const HeadScoreOptions options{.length = 5, .sequences = 3, .seed = 9};
  const int64_t n = options.length;
  for (const std::string& kind : testing::token_model_kinds()) {
    for (const DType dtype : {DType::Float32, DType::Float64}) {
      SCOPED_TRACE(kind + (dtype == DType::Float32 ? " float32" : " float64"));
      const std::shared_ptr<SequenceModel> model = model_of(kind, dtype, 8);
      const std::vector<LayerHeadScores> scores = head_scores(*model, options);
      EXPECT_TRUE(model->is_training());
      model->eval();
      const ActivationCache cache =
          run_with_cache(*model, batch_of(*model, head_score_tokens(*model, options)),
                         "*hook_pattern", {.logits = false});
      // Two blocks; the encoder-decoder's two encoder, two decoder and two cross-attentions.
      ASSERT_EQ(scores.size(), kind == "seq2seq" ? 6u : 2u);
      ASSERT_EQ(cache.names().size(), scores.size());
      double spread = 0;
      for (size_t l = 0; l < scores.size(); ++l) {
        const Tensor& pattern = cache.at(cache.names()[l]);  // [B, H, Tq, Tk]
        EXPECT_EQ(scores[l].point, cache.names()[l]);
        ASSERT_EQ(pattern.shape(), (Shape{3, 3, 2 * n, 2 * n}));
        ASSERT_EQ(scores[l].induction.size(), 3u);
        for (int64_t h = 0; h < 3; ++h) {
          const double previous = by_hand(pattern, h, 1, 1);
          const double duplicate = by_hand(pattern, h, n, n);
          const double induction = by_hand(pattern, h, n - 1, n);
          EXPECT_NEAR(scores[l].previous_token[h], previous, 1e-12) << scores[l].point << h;
          EXPECT_NEAR(scores[l].duplicate_token[h], duplicate, 1e-12) << scores[l].point << h;
          EXPECT_NEAR(scores[l].induction[h], induction, 1e-12) << scores[l].point << h;
          spread =
              std::max({spread, std::abs(previous - duplicate), std::abs(duplicate - induction)});
        }
      }
      // The diagonals differ enough for a wrong index to show.
      EXPECT_GT(spread, 0.05);
    }
  }
}

// By the tokens, on two copies of distinct tokens, the reduction finds exactly the keys the
// diagonals hold: the same scores, batch by batch as at once.
TEST(HeadScores, TheReductionByTokensEqualsTheDiagonalsOnDistinctCopies) {
  const HeadScoreOptions options{.length = 5, .sequences = 3, .seed = 4};
  const std::shared_ptr<SequenceModel> model = model_of("decoder", DType::Float64, 8);
  const std::vector<LayerHeadScores> expected = head_scores(*model, options);
  model->eval();
  const Indices tokens = head_score_tokens(*model, options);
  HeadScoreReduction reduction;
  for (int64_t b = 0; b < 3; ++b) {  // one sequence a batch
    const int64_t T = tokens.shape[1];
    const Indices row({1, T}, std::vector<int64_t>(tokens.values.begin() + b * T,
                                                   tokens.values.begin() + (b + 1) * T));
    const ActivationCache cache =
        run_with_cache(*model, batch_of(*model, row), "*hook_pattern", {.logits = false});
    std::vector<Tensor> patterns;
    for (const std::string& name : cache.names()) patterns.push_back(cache.at(name));
    reduction.add(cache.names(), patterns, row);
  }
  const std::vector<LayerHeadScores> scores = reduction.scores();
  ASSERT_EQ(scores.size(), expected.size());
  for (size_t l = 0; l < scores.size(); ++l) {
    EXPECT_EQ(scores[l].point, expected[l].point);
    for (size_t h = 0; h < expected[l].induction.size(); ++h) {
      EXPECT_NEAR(scores[l].previous_token[h], expected[l].previous_token[h], 1e-12);
      EXPECT_NEAR(scores[l].duplicate_token[h], expected[l].duplicate_token[h], 1e-12);
      EXPECT_NEAR(scores[l].induction[h], expected[l].induction[h], 1e-12);
    }
  }
  EXPECT_THROW(
      reduction.add({scores[0].point}, {Tensor::zeros({1, 2, 3, 3}, DType::Float64)}, tokens),
      ShapeError);
}

// With zero queries every key a query sees gets the same weight: 1 / (i + 1) under the causal
// mask, 1 / 2n where a query sees every key (the encoder, cross-attention).
TEST(HeadScores, UniformAttentionScoresOneOverTheKeysSeen) {
  const int64_t n = 6;
  double previous_causal = 0, target_causal = 0;
  for (int64_t i = 1; i < 2 * n; ++i) previous_causal += 1.0 / static_cast<double>(i + 1);
  for (int64_t i = n; i < 2 * n; ++i) target_causal += 1.0 / static_cast<double>(i + 1);
  previous_causal /= static_cast<double>(2 * n - 1);
  target_causal /= static_cast<double>(n);
  for (const std::string& kind : testing::token_model_kinds()) {
    SCOPED_TRACE(kind);
    const std::shared_ptr<SequenceModel> model = model_of(kind, DType::Float64, 0);
    for (const LayerHeadScores& point : head_scores(*model, {.sequences = 2})) {
      const bool causal = !contains(point.point, "encoder.") && !contains(point.point, "cross");
      for (size_t h = 0; h < point.induction.size(); ++h) {
        const double all = 1.0 / static_cast<double>(2 * n);
        EXPECT_NEAR(point.previous_token[h], causal ? previous_causal : all, 1e-12) << point.point;
        EXPECT_NEAR(point.duplicate_token[h], causal ? target_causal : all, 1e-12) << point.point;
        EXPECT_NEAR(point.induction[h], causal ? target_causal : all, 1e-12) << point.point;
      }
    }
  }
}

TEST(HeadScores, TokensAreTwoCopiesOfDistinctTokens) {
  const std::shared_ptr<SequenceModel> model = model_of("decoder", DType::Float32, 1);
  const Indices tokens = head_score_tokens(*model, {.sequences = 50, .seed = 4});
  ASSERT_EQ(tokens.shape, (Shape{50, 12}));  // n = floor(13 / 2) = 6
  std::set<int64_t> seen;
  for (int64_t b = 0; b < 50; ++b) {
    const auto row = tokens.values.begin() + b * 12;
    EXPECT_TRUE(std::equal(row, row + 6, row + 6)) << "row " << b;
    const std::set<int64_t> copy(row, row + 6);
    EXPECT_EQ(copy.size(), 6u) << "row " << b;
    seen.insert(copy.begin(), copy.end());
  }
  // Every token of [0, V) is drawn, none outside it.
  EXPECT_EQ(seen.size(), 11u);
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), 10);
  EXPECT_EQ(head_score_tokens(*model, {.sequences = 50, .seed = 4}), tokens);
  EXPECT_NE(head_score_tokens(*model, {.sequences = 50, .seed = 5}), tokens);
  // More positions than tokens: n = 6 > V = 4, so a copy repeats tokens, still inside [0, V).
  ModelConfig few = unequal_config();
  few.vocab_size = 4;
  const Indices repeated =
      head_score_tokens(*model_of("decoder", DType::Float32, 1, few), {.sequences = 5});
  for (const int64_t token : repeated.values) EXPECT_TRUE(token >= 0 && token < 4) << token;
}

TEST(HeadScores, BadLengthsAndSequencesAreConfigErrors) {
  const std::shared_ptr<SequenceModel> model = model_of("seq2seq", DType::Float32, 1);
  EXPECT_EQ(head_score_length(*model, {}), 6);
  EXPECT_EQ(max_head_score_length(*model), 6);
  EXPECT_EQ(head_score_length(*model, {.length = 2}), 2);
  const auto message = [&](const HeadScoreOptions& options) -> std::string {
    try {
      head_scores(*model, options);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "no error";
  };
  for (const char* part : {"length 7", "needs 14 positions", "has 13", "at most 6"}) {
    EXPECT_TRUE(contains(message({.length = 7}), part)) << message({.length = 7});
  }
  EXPECT_TRUE(contains(message({.length = 1}), "length 1 is below 2")) << message({.length = 1});
  EXPECT_TRUE(contains(message({.length = -3}), "length -3")) << message({.length = -3});
  EXPECT_TRUE(contains(message({.sequences = 0}), "0 sequences")) << message({.sequences = 0});
  const HeadScoreOptions overflowing{.sequences = std::numeric_limits<int64_t>::max()};
  EXPECT_TRUE(contains(message(overflowing), "more tokens than can be counted"))
      << message(overflowing);
  ModelConfig short_positions = unequal_config();
  short_positions.max_len = 3;
  const std::shared_ptr<SequenceModel> short_model =
      model_of("decoder", DType::Float32, 1, short_positions);
  EXPECT_THROW(head_scores(*short_model, {}), ConfigError);
  EXPECT_TRUE(model->is_training());
}

}  // namespace test_head_scores
}  // namespace gradlab::interp
