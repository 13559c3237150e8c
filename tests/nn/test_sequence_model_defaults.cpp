// A plain language model of one's own implements forward() alone: SequenceModel gives it the
// decoder-only batch layout, the loss and a greedy decode by repeated forward passes. The model
// here is a bigram table (logits = the row of the token read), small enough to set by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "autograd/graph.h"
#include "autograd/ops.h"
#include "nn/sequence_model.h"

namespace gradlab::nn {
namespace sequence_model_defaults_test {

constexpr int64_t kVocabulary = 5;  // V

// What one forward() call saw.
struct Call {
  SequenceBatch batch;
  bool training = false;
  bool recording = false;
};

// Only the required method: forward. Parameters come from Module's registration.
class Bigram : public SequenceModel {
 public:
  Bigram() : SequenceModel(ModelConfig{.vocab_size = kVocabulary}) {
    table = register_parameter("table", Tensor::zeros({kVocabulary, kVocabulary}));
  }
  Tensor forward(const SequenceBatch& batch, AttentionMaps* = nullptr) const override {
    calls.push_back({batch, is_training(), grad_enabled()});
    return embedding(table, batch.inputs);  // [B, T] -> [B, T, V]
  }

  Tensor table;  // [V, V]: row t holds the logits of the token after t
  mutable std::vector<Call> calls;
};

// The table that predicts t + 1 (mod V) after every token t.
void predict_the_successor(Bigram& model) {
  std::vector<double> values(kVocabulary * kVocabulary, 0.0);
  for (int64_t t = 0; t < kVocabulary; ++t) values[t * kVocabulary + (t + 1) % kVocabulary] = 1;
  model.table.copy_from(Tensor::from_vector(values, {kVocabulary, kVocabulary}));
}

TEST(SequenceModelDefaults, MakeBatchIsTheDecoderOnlyLayout) {
  const Bigram model;
  // Two samples [B = 2, P + 1 + A = 2 + 1 + 2]: prompt, separator 0, answer.
  const Indices samples({2, 5}, {1, 2, 0, 3, 4, 4, 3, 0, 2, 1});
  const SequenceBatch got = model.make_batch(samples, 2);
  const SequenceBatch want = decoder_batch(samples, 2);
  EXPECT_TRUE(got.source.values.empty());
  EXPECT_EQ(got.inputs.shape, want.inputs.shape);
  EXPECT_EQ(got.inputs.values, want.inputs.values);
  EXPECT_EQ(got.targets.shape, want.targets.shape);
  EXPECT_EQ(got.targets.values, want.targets.values);
  EXPECT_EQ(got.targets.values, (std::vector<int64_t>{kIgnoreTarget, kIgnoreTarget, 3, 4,
                                                      kIgnoreTarget, kIgnoreTarget, 2, 1}));
}

TEST(SequenceModelDefaults, TheLossTrainsTheParameters) {
  Bigram model;
  const SequenceBatch batch = model.make_batch(Indices({1, 4}, {1, 0, 2, 3}), 1);
  const Tensor loss = model.loss(batch);
  // Zero logits: every counted target has probability 1/V.
  EXPECT_NEAR(loss.item(), std::log(static_cast<double>(kVocabulary)), 1e-6);
  loss.backward();
  // Only the rows of the tokens whose successors count (0 and 2) get a gradient.
  const Tensor grad = model.table.grad();
  ASSERT_TRUE(grad.defined());
  EXPECT_NE(grad.at({0, 2}), 0);
  EXPECT_NE(grad.at({2, 3}), 0);
  for (int64_t v = 0; v < kVocabulary; ++v) EXPECT_EQ(grad.at({1, v}), 0) << v;
}

TEST(SequenceModelDefaults, GreedyDecodeRunsForwardOncePerAnswerToken) {
  Bigram model;
  predict_the_successor(model);
  const std::vector<int64_t> answer = model.greedy_decode({3, 1}, 0, 3);
  EXPECT_EQ(answer, (std::vector<int64_t>{1, 2, 3}));  // after the separator 0: 1, 2, 3

  ASSERT_EQ(model.calls.size(), 3u);
  const std::vector<std::vector<int64_t>> inputs{{3, 1, 0}, {3, 1, 0, 1}, {3, 1, 0, 1, 2}};
  for (size_t i = 0; i < model.calls.size(); ++i) {
    const Call& call = model.calls[i];
    const int64_t length = static_cast<int64_t>(inputs[i].size());
    EXPECT_TRUE(call.batch.source.values.empty()) << i;
    EXPECT_EQ(call.batch.inputs.shape, (Shape{1, length})) << i;
    EXPECT_EQ(call.batch.inputs.values, inputs[i]) << i;
    EXPECT_EQ(call.batch.targets.shape, (Shape{1, length})) << i;
    EXPECT_EQ(call.batch.targets.values, std::vector<int64_t>(inputs[i].size(), kIgnoreTarget))
        << i;
    EXPECT_FALSE(call.training) << i;   // evaluation mode: no dropout
    EXPECT_FALSE(call.recording) << i;  // no graph
  }
  EXPECT_TRUE(model.is_training());
  EXPECT_TRUE(grad_enabled());
}

TEST(SequenceModelDefaults, GreedyDecodeBreaksTiesTowardsTheLowestToken) {
  Bigram model;  // all logits zero
  EXPECT_EQ(model.greedy_decode({4}, 0, 2), (std::vector<int64_t>{0, 0}));
}

}  // namespace sequence_model_defaults_test
}  // namespace gradlab::nn
