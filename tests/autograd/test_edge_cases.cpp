// Numerical and size edge cases: extreme and infinite logits in softmax, log_softmax and
// cross_entropy; attention rows whose keys are all masked, in the fused and the composed path;
// sequences of length 1; batches of one sequence. (A learning rate so large that the loss
// diverges is covered by TrainTest.CliDivergenceSavesNothingFromTheDivergedState and
// TrainTest.NonFiniteLossNamesTheStepAndSkipsTheUpdate in tests/train/test_train.cpp, and by
// tests/train/test_divergence.cpp.)
//
// Infinite logits, as decided here and in autograd/softmax.h:
// - -inf is a masked entry: softmax 0, log_softmax -inf, gradient 0 there; the other entries
//   are finite and their gradients too. A row that is -inf everywhere gives softmax 0,
//   log_softmax -inf and a zero gradient.
// - cross_entropy whose target logit is -inf (the model rules the right answer out) is +inf:
//   -log 0, not NaN, with a finite gradient. The trainer refuses that step (NonFiniteLoss).
//   An ignored position with a -inf logit does not count.
// - +inf is outside the domain (inf - inf): the row's results are NaN, never a silent finite
//   number, and the trainer refuses the step.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "autograd/graph.h"
#include "autograd/ops.h"
#include "data/tasks.h"
#include "nn/attention.h"
#include "tests/cli_runner.h"
#include "tests/test_helpers.h"
#include "train/config.h"
#include "train/trainer.h"

namespace gradlab {

// How gtest shows the dtype parameter in test names (internal linkage: found by argument-dependent
// lookup, private to this file).
static void PrintTo(DType dtype, std::ostream* out) {
  *out << (dtype == DType::Float32 ? "float32" : "float64");
}

namespace test_edge_cases {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::contains;
using testing::run_gradlab;
using testing::TempDir;

constexpr double kInf = std::numeric_limits<double>::infinity();

bool all_finite(const Tensor& t) {
  for (double x : t.to_vector()) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

bool any_nan(const Tensor& t) {
  for (double x : t.to_vector()) {
    if (std::isnan(x)) return true;
  }
  return false;
}

class EdgeCases : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { omp_set_num_threads(1); }
  DType dtype() const { return GetParam(); }
  Tensor leaf(std::initializer_list<std::initializer_list<double>> rows) const {
    return tensor(rows, dtype()).set_requires_grad();
  }
};

INSTANTIATE_TEST_SUITE_P(Dtypes, EdgeCases, ::testing::Values(DType::Float32, DType::Float64),
                         [](const auto& info) {
                           return info.param == DType::Float32 ? "Float32" : "Float64";
                         });

// ---------------------------------------------------------------------------------------------
// Softmax, log_softmax, cross_entropy.

TEST_P(EdgeCases, SoftmaxOfHugeLogitsIsExact) {
  const Tensor x = leaf({{1e4, 0, -1e4}, {1e4, 1e4, -1e4}, {-1e4, -1e4, -1e4}});
  const Tensor y = softmax(x, -1);
  EXPECT_TRUE(allclose(y, tensor({{1, 0, 0}, {0.5, 0.5, 0}, {1.0 / 3, 1.0 / 3, 1.0 / 3}}))) << y;
  sum(y * tensor({{1, 2, 3}, {1, 2, 3}, {1, 2, 3}}, dtype())).backward();
  EXPECT_TRUE(all_finite(x.grad())) << x.grad();
}

TEST_P(EdgeCases, LogSoftmaxOfHugeLogitsKeepsTheDifferences) {
  const Tensor x = leaf({{1e4, 0, -1e4}});
  const Tensor y = log_softmax(x, -1);
  EXPECT_TRUE(allclose(y, tensor({{0, -1e4, -2e4}}), 1e-6, 1e-3)) << y;
  sum(y).backward();
  EXPECT_TRUE(all_finite(x.grad())) << x.grad();
  // d/dx sum(log_softmax) = 1 - 3 softmax: [-2, 1, 1].
  EXPECT_TRUE(allclose(x.grad(), tensor({{-2, 1, 1}}), 1e-6, 1e-6)) << x.grad();
}

TEST_P(EdgeCases, CrossEntropyOfHugeLogitsIsFinite) {
  const Tensor x = leaf({{1e4, 0, -1e4}, {1e4, 0, -1e4}});
  const Tensor loss = cross_entropy(x, Indices({2}, {0, 2}));
  // Right with certainty (0) and wrong by 2e4: mean 1e4.
  EXPECT_NEAR(loss.item(), 1e4, 1e-2);
  loss.backward();
  EXPECT_TRUE(all_finite(x.grad())) << x.grad();
}

TEST_P(EdgeCases, MinusInfinityIsAMaskedEntry) {
  const Tensor x = leaf({{-kInf, 1, 2}, {0, -kInf, -kInf}});
  const Tensor y = softmax(x, -1);
  EXPECT_EQ(y.at({0, 0}), 0);
  EXPECT_TRUE(
      allclose(y, tensor({{0, 1 / (1 + std::exp(1.0)), 1 / (1 + std::exp(-1.0))}, {1, 0, 0}})))
      << y;
  sum(y * tensor({{1, 2, 3}, {1, 2, 3}}, dtype())).backward();
  EXPECT_TRUE(all_finite(x.grad())) << x.grad();
  EXPECT_EQ(x.grad().at({0, 0}), 0);

  const Tensor z = leaf({{-kInf, 1, 2}});
  const Tensor log_y = log_softmax(z, -1);
  EXPECT_EQ(log_y.at({0, 0}), -kInf);
  EXPECT_TRUE(std::isfinite(log_y.at({0, 1})) && std::isfinite(log_y.at({0, 2}))) << log_y;
  // Only the finite entries of a log_softmax are usable downstream; pick them with a gradient.
  log_y.backward(tensor({{0, 1, 1}}, dtype()));
  EXPECT_TRUE(all_finite(z.grad())) << z.grad();
}

TEST_P(EdgeCases, RowOfMinusInfinityIsZeroNotNaN) {
  const Tensor x = leaf({{-kInf, -kInf, -kInf}, {1, 2, 3}});
  const Tensor y = softmax(x, -1);
  EXPECT_EQ(y.at({0, 0}), 0);
  EXPECT_EQ(y.at({0, 1}), 0);
  EXPECT_EQ(y.at({0, 2}), 0);
  sum(y * tensor({{1, 2, 3}, {1, 2, 3}}, dtype())).backward();
  EXPECT_TRUE(all_finite(x.grad())) << x.grad();
  EXPECT_EQ(x.grad().at({0, 0}), 0);

  const Tensor z = leaf({{-kInf, -kInf, -kInf}});
  const Tensor log_y = log_softmax(z, -1);
  for (double v : log_y.to_vector()) EXPECT_EQ(v, -kInf);
  log_y.backward(tensor({{1, 1, 1}}, dtype()));
  for (double g : z.grad().to_vector()) EXPECT_EQ(g, 0);
}

TEST_P(EdgeCases, CrossEntropyOfAMinusInfinityTargetIsPlusInfinity) {
  const Tensor x = leaf({{-kInf, 1, 2}, {0, 1, 2}});
  const Tensor loss = cross_entropy(x, Indices({2}, {0, 2}));
  EXPECT_EQ(loss.item(), kInf);
  loss.backward();
  EXPECT_TRUE(all_finite(x.grad())) << x.grad();

  // A -inf logit of another class is just a ruled-out class: finite loss.
  const Tensor other = leaf({{-kInf, 1, 2}});
  const Tensor finite = cross_entropy(other, Indices({1}, {2}));
  EXPECT_NEAR(finite.item(), std::log(1 + std::exp(-1.0)), 1e-6);
  finite.backward();
  EXPECT_TRUE(all_finite(other.grad())) << other.grad();

  // An ignored position does not count, whatever its logits.
  const Tensor ignored = leaf({{-kInf, -kInf, -kInf}, {0, 0, 0}});
  const Tensor kept = cross_entropy(ignored, Indices({2}, {-100, 1}));
  EXPECT_NEAR(kept.item(), std::log(3.0), 1e-6);
  kept.backward();
  EXPECT_TRUE(all_finite(ignored.grad())) << ignored.grad();
}

TEST_P(EdgeCases, PlusInfinityIsNaNNotASilentNumber) {
  const Tensor x = tensor({{kInf, 0, 1}}, dtype());
  EXPECT_TRUE(any_nan(softmax(x, -1)));
  EXPECT_TRUE(any_nan(log_softmax(x, -1)));
  EXPECT_FALSE(std::isfinite(cross_entropy(x, Indices({1}, {1})).item()));
}

// ---------------------------------------------------------------------------------------------
// Attention rows whose keys are all masked.

// Batch element 1 masks every key; element 0 masks only its last key.
Mask padding_all_of_second(int64_t tk) {
  std::vector<uint8_t> values(static_cast<size_t>(2 * tk), 0);
  values[static_cast<size_t>(tk - 1)] = 1;
  for (int64_t k = 0; k < tk; ++k) values[static_cast<size_t>(tk + k)] = 1;
  return Mask({2, tk}, values);
}

struct AttentionRun {
  Tensor output, weights, x_grad;
  std::vector<Tensor> parameter_grads;
};

AttentionRun run_attention(bool bias, bool causal, bool composed) {
  Generator gen(7);
  nn::MultiHeadAttention attn({.d_model = 8, .num_heads = 2, .bias = bias}, gen);
  const Tensor x = Tensor::randn({2, 5, 8}, gen).set_requires_grad();
  nn::AttentionMasks masks;
  masks.causal = causal;
  masks.key_padding_mask = padding_all_of_second(5);
  nn::AttentionTrace trace;
  const nn::AttentionOutput out =
      attn.forward_with_weights(x, x, masks, composed ? &trace : nullptr);
  sum(out.output * out.output).backward();
  AttentionRun run{out.output, out.weights, x.grad(), {}};
  for (const Tensor& p : attn.parameters()) run.parameter_grads.push_back(p.grad());
  return run;
}

void expect_fully_masked_element_is_zero(const AttentionRun& run, bool bias) {
  EXPECT_TRUE(all_finite(run.output)) << run.output;
  EXPECT_TRUE(all_finite(run.weights)) << run.weights;
  EXPECT_TRUE(all_finite(run.x_grad)) << run.x_grad;
  for (const Tensor& g : run.parameter_grads) EXPECT_TRUE(all_finite(g)) << g;
  // Element 1: weights 0 everywhere; without biases its output is 0; its input gets no gradient
  // (its output does not depend on it).
  const Tensor w1 = narrow(run.weights, 0, 1, 1);
  for (double w : w1.to_vector()) EXPECT_EQ(w, 0);
  if (!bias) {
    for (double y : narrow(run.output, 0, 1, 1).to_vector()) EXPECT_EQ(y, 0);
  }
  for (double g : narrow(run.x_grad, 0, 1, 1).to_vector()) EXPECT_EQ(g, 0);
  // Element 0 attends normally: each query's weights sum to 1, none on the padded last key.
  const Tensor w0 = narrow(run.weights, 0, 0, 1);  // [1, H, Tq, Tk]
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t q = 0; q < 5; ++q) {
      double total = 0;
      for (int64_t k = 0; k < 5; ++k) total += w0.at({0, h, q, k});
      EXPECT_NEAR(total, 1, 1e-5);
      EXPECT_EQ(w0.at({0, h, q, 4}), 0);
    }
  }
}

TEST(EdgeCaseAttention, FullyMaskedBatchElementIsZeroInBothPaths) {
  for (const bool bias : {false, true}) {
    for (const bool causal : {false, true}) {
      SCOPED_TRACE(std::string(bias ? "bias" : "no bias") + (causal ? ", causal" : ""));
      const AttentionRun fused = run_attention(bias, causal, false);
      const AttentionRun composed = run_attention(bias, causal, true);
      {
        SCOPED_TRACE("fused");
        expect_fully_masked_element_is_zero(fused, bias);
      }
      {
        SCOPED_TRACE("composed");
        expect_fully_masked_element_is_zero(composed, bias);
      }
      EXPECT_TRUE(allclose(fused.output, composed.output, 1e-5, 1e-6));
      EXPECT_TRUE(allclose(fused.x_grad, composed.x_grad, 1e-4, 1e-5));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Sequences of length 1, batches of one.

train::RunConfig tiny_config(const std::string& model, const std::string& task, int64_t length,
                             int64_t batch_size, int64_t eval_size) {
  train::RunConfig c;
  c.model = model;
  c.task.name = task;
  c.task.sequence.length = length;
  c.net.d_model = 16;
  c.net.feed_forward.d_ff = 16;
  c.net.attention.num_heads = 2;
  c.net.num_layers = 1;
  c.batch_size = batch_size;
  c.eval_size = eval_size;
  c.steps = 5;
  c.threads = 1;
  train::finalize(c);
  return c;
}

void expect_trains(const train::RunConfig& config) {
  train::Trainer trainer(config);
  for (int i = 0; i < 3; ++i) {
    const train::StepResult r = trainer.train_step();
    EXPECT_TRUE(std::isfinite(r.loss) && std::isfinite(r.grad_norm));
  }
  EXPECT_EQ(trainer.step(), 3);
  const train::Metrics m = trainer.evaluate();
  EXPECT_TRUE(std::isfinite(m.loss));
  EXPECT_GE(m.exact_match, 0);
  EXPECT_LE(m.exact_match, 1);
  const auto task = data::make_sequence_task(config.task);
  std::vector<int64_t> prompt(static_cast<size_t>(task->prompt_length()), 1);
  if (config.task.name == "recall") prompt = {1, 2, 1};
  EXPECT_EQ(trainer.model().greedy_decode(prompt, data::kSeparator, task->answer_length()).size(),
            static_cast<size_t>(task->answer_length()));
}

TEST(EdgeCaseSizes, LengthOneSequencesTrain) {
  for (const std::string model : {"decoder", "seq2seq"}) {
    for (const std::string task : {"copy", "reverse", "sort", "recall"}) {
      SCOPED_TRACE(model + " " + task);
      expect_trains(tiny_config(model, task, 1, 4, 4));
    }
  }
}

TEST(EdgeCaseSizes, LengthZeroIsAConfigError) {
  for (const std::string task : {"copy", "reverse", "sort", "recall"}) {
    SCOPED_TRACE(task);
    data::TaskConfig config;
    config.name = task;
    config.sequence.length = 0;
    EXPECT_THROW(data::make_task(config), ConfigError);
    EXPECT_THROW(tiny_config("decoder", task, 0, 4, 4), ConfigError);
  }
  TempDir tmp;
  const CommandResult r = run_gradlab({"train", "--length", "0", "--out", tmp.file("never")});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_TRUE(contains(r.err, "length")) << r.err;
  EXPECT_FALSE(fs::exists(tmp.file("never")));
}

TEST(EdgeCaseSizes, BatchOfOneTrainsAndEvaluates) {
  for (const std::string model : {"decoder", "seq2seq"}) {
    SCOPED_TRACE(model);
    expect_trains(tiny_config(model, "copy", 3, 1, 1));
  }
}

TEST(EdgeCaseSizes, CliTrainsWithBatchOfOneAndLengthOneAndEvaluatesOneSequence) {
  TempDir tmp;
  const std::string run = tmp.file("run");
  const CommandResult r = run_gradlab({"train", "--length", "1", "--d-model", "16", "--d-ff", "16",
                                       "--layers", "1", "--batch-size", "1", "--eval-size", "1",
                                       "--steps", "3", "--eval-every", "1", "--out", run});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::string checkpoint = (fs::path(run) / "step-000003.h5").string();
  ASSERT_TRUE(fs::exists(checkpoint));
  const CommandResult eval = run_gradlab({"eval", "--checkpoint", checkpoint});
  ASSERT_EQ(eval.exit_code, 0) << eval.describe();
  EXPECT_TRUE(contains(eval.out, "1 held-out sequences")) << eval.out;
  const CommandResult predict =
      run_gradlab({"predict", "--checkpoint", checkpoint, "--input", "7"});
  ASSERT_EQ(predict.exit_code, 0) << predict.describe();
  EXPECT_TRUE(contains(predict.out, "expected 7")) << predict.out;
}

}  // namespace test_edge_cases
}  // namespace gradlab
