// Ablation of every head and feed-forward sublayer (interp/ablation.h) against what it must equal:
// zeroing a head's z is zeroing its columns of W_O, zeroing a feed-forward sublayer's output is
// zeroing its second Linear, and the mean over a held-out set of one sequence is that sequence.
#include <gtest/gtest.h>

#include <cmath>

#include "interp/ablation.h"
#include "tests/train/small_run.h"
#include "train/trainer.h"

namespace gradlab::testing {
namespace test_ablation {

train::RunConfig trained_config(const std::string& model, int64_t eval_size = 64) {
  train::RunConfig c;
  c.model = model;
  c.task.sequence.length = 4;
  c.net.d_model = 24;
  c.net.attention.num_heads = 3;
  c.net.feed_forward.d_ff = 40;
  c.batch_size = 16;
  c.eval_size = eval_size;
  train::finalize(c);
  return c;
}

std::unique_ptr<train::Trainer> trained(const train::RunConfig& config, int steps = 40) {
  auto trainer = std::make_unique<train::Trainer>(config);
  for (int i = 0; i < steps; ++i) trainer->train_step();
  return trainer;
}

using AblatedPart = interp::AblatedPart<train::Metrics>;
using AblationResults = interp::AblationResults<train::Metrics>;

interp::HeldOutEvaluation<train::Metrics> held_out(train::Trainer& trainer) {
  return {trainer.model(), trainer.heldout(), [&trainer] { return trainer.evaluate(); }};
}

struct Columns {
  std::string parameter;
  int64_t begin, end;  // along the parameter's last axis
};

// The held-out metrics with the columns' elements set to zero, which are then put back.
train::Metrics evaluate_with_zeroed(train::Trainer& trainer, const std::vector<Columns>& zeroed) {
  std::vector<std::vector<float>> saved;
  for (const Columns& c : zeroed) {
    Tensor p = trainer.model().parameter(c.parameter);
    const int64_t width = p.size(p.rank() - 1);
    float* values = p.mutable_data<float>();
    saved.emplace_back(values, values + p.numel());
    for (int64_t i = 0; i < p.numel(); ++i) {
      if (i % width >= c.begin && i % width < c.end) values[i] = 0;
    }
  }
  const train::Metrics metrics = trainer.evaluate();
  // In reverse: the first save of a parameter named twice holds its values before any zeroing.
  for (size_t k = zeroed.size(); k-- > 0;) {
    Tensor p = trainer.model().parameter(zeroed[k].parameter);
    std::copy(saved[k].begin(), saved[k].end(), p.mutable_data<float>());
  }
  return metrics;
}

TEST(Ablation, ListsEveryHeadAndFeedForwardSublayerInForwardOrder) {
  for (const char* model : {"decoder", "seq2seq"}) {
    auto trainer = trained(trained_config(model), 0);
    const AblationResults results =
        interp::ablate_each_part(held_out(*trainer), interp::AblationMode::zero);
    std::vector<std::string> expected;
    auto attention = [&](const std::string& module) {
      for (int h = 0; h < 3; ++h) expected.push_back(module + ".hook_z/" + std::to_string(h));
    };
    if (std::string(model) == "decoder") {
      for (const char* block : {"blocks.0", "blocks.1"}) {
        attention(std::string(block) + ".attn");
        expected.push_back(std::string(block) + ".hook_mlp_out/-1");
      }
    } else {
      for (const char* block : {"encoder.0", "encoder.1"}) {
        attention(std::string(block) + ".attn");
        expected.push_back(std::string(block) + ".hook_mlp_out/-1");
      }
      for (const char* block : {"decoder.0", "decoder.1"}) {
        attention(std::string(block) + ".attn");
        attention(std::string(block) + ".cross_attn");
        expected.push_back(std::string(block) + ".hook_mlp_out/-1");
      }
    }
    std::vector<std::string> listed;
    for (const AblatedPart& part : results.parts) {
      listed.push_back(part.point + "/" + std::to_string(part.head));
    }
    EXPECT_EQ(listed, expected) << model;
  }
}

TEST(Ablation, ZeroingAHeadIsZeroingItsColumnsOfTheOutputProjection) {
  for (const char* model : {"decoder", "seq2seq"}) {
    const train::RunConfig config = trained_config(model);
    auto trainer = trained(config);
    const AblationResults results =
        interp::ablate_each_part(held_out(*trainer), interp::AblationMode::zero);
    const int64_t head_dim = config.net.d_model / config.net.attention.num_heads;
    const std::string prefix = std::string(model) == "decoder" ? "blocks." : "decoder.";
    for (const AblatedPart& part : results.parts) {
      if (!part.point.starts_with(prefix + "1.")) continue;
      // The same run with the part removed from the weights instead.
      const std::string module = part.point.substr(0, part.point.rfind('.'));
      const train::Metrics m =
          part.head >= 0
              ? evaluate_with_zeroed(*trainer, {{module + ".out_proj.weight", part.head * head_dim,
                                                 (part.head + 1) * head_dim}})
              : evaluate_with_zeroed(*trainer,
                                     {{module + ".ffn.fc2.weight", 0, config.net.feed_forward.d_ff},
                                      {module + ".ffn.fc2.bias", 0, config.net.d_model}});
      EXPECT_NEAR(part.metrics.loss, m.loss, 1e-5 * (1 + m.loss))
          << model << " " << part.point << " head " << part.head;
      EXPECT_NEAR(part.metrics.token_accuracy, m.token_accuracy, 1e-9) << part.point;
      EXPECT_GT(std::abs(part.metrics.loss - results.intact.loss), 1e-6)
          << part.point << " head " << part.head << ": knocking it out changed nothing";
    }
  }
}

// A set knocked out at once is the set removed from the weights: heads 0 and 2 of a 3-head
// attention and a feed-forward sublayer of another block, together; a set of one part is that
// part's cell of the table, in both modes (up to rounding: the mean is read by an evaluation
// that hooks fewer points, whose attention may take the fused path).
TEST(Ablation, KnockingOutASetTogetherIsRemovingItFromTheWeights) {
  for (const char* model : {"decoder", "seq2seq"}) {
    const train::RunConfig config = trained_config(model);
    auto trainer = trained(config);
    const std::string block = std::string(model) == "decoder" ? "blocks." : "decoder.";
    const std::string attention = block + "1.attn";
    const std::vector<interp::ModelPart> set{
        {attention + ".hook_z", 0}, {attention + ".hook_z", 2}, {block + "0.hook_mlp_out", -1}};
    const train::Metrics together =
        interp::ablate_together(held_out(*trainer), interp::AblationMode::zero, set);
    const int64_t head_dim = config.net.d_model / config.net.attention.num_heads;
    const train::Metrics m = evaluate_with_zeroed(
        *trainer, {{attention + ".out_proj.weight", 0, head_dim},
                   {attention + ".out_proj.weight", 2 * head_dim, 3 * head_dim},
                   {block + "0.ffn.fc2.weight", 0, config.net.feed_forward.d_ff},
                   {block + "0.ffn.fc2.bias", 0, config.net.d_model}});
    EXPECT_NEAR(together.loss, m.loss, 1e-5 * (1 + m.loss)) << model;
    EXPECT_NEAR(together.token_accuracy, m.token_accuracy, 1e-9) << model;

    for (const interp::AblationMode mode :
         {interp::AblationMode::zero, interp::AblationMode::mean}) {
      const AblationResults each = interp::ablate_each_part(held_out(*trainer), mode);
      for (const size_t i : {size_t{0}, each.parts.size() - 1}) {
        const AblatedPart& part = each.parts[i];
        EXPECT_NEAR(interp::ablate_together(held_out(*trainer), mode, {part}).loss,
                    part.metrics.loss, 1e-6 * (1 + part.metrics.loss))
            << model << " " << part.point << " head " << part.head;
      }
    }
  }
}

TEST(Ablation, TheMeanOverAHeldOutSetOfOneSequenceIsThatSequence) {
  for (const char* model : {"decoder", "seq2seq"}) {
    auto trainer = trained(trained_config(model, 1));
    const AblationResults results =
        interp::ablate_each_part(held_out(*trainer), interp::AblationMode::mean);
    ASSERT_FALSE(results.parts.empty());
    for (const AblatedPart& part : results.parts) {
      EXPECT_NEAR(part.metrics.loss, results.intact.loss, 1e-5) << model << " " << part.point;
    }
  }
}

TEST(Ablation, MeanAblationKeepsWhatAPartSaysOnAverage) {
  auto trainer = trained(trained_config("decoder"), 150);
  const AblationResults zero =
      interp::ablate_each_part(held_out(*trainer), interp::AblationMode::zero);
  const AblationResults mean =
      interp::ablate_each_part(held_out(*trainer), interp::AblationMode::mean);
  ASSERT_EQ(zero.parts.size(), mean.parts.size());
  EXPECT_EQ(zero.intact.loss, mean.intact.loss);
  double zero_total = 0, mean_total = 0;
  for (size_t i = 0; i < zero.parts.size(); ++i) {
    zero_total += zero.parts[i].metrics.loss;
    mean_total += mean.parts[i].metrics.loss;
  }
  EXPECT_LT(mean_total, zero_total) << "a mean keeps the part's constant contribution";
}

}  // namespace test_ablation
}  // namespace gradlab::testing
