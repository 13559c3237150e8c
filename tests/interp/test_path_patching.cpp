// Path patching (interp/path_patching.h): a sender patched into every later input equals
// activation patching of that sender, a planted induction circuit runs through the keys alone,
// prompts that do not differ score the corrupted run, and bad specs are one-line errors naming
// the spec.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "autograd/error.h"
#include "interp/patching.h"
#include "interp/path_patching.h"
#include "nn/models.h"
#include "tests/test_helpers.h"

namespace gradlab::interp {
namespace test_path_patching {

using namespace gradlab::nn;
using testing::contains;

// Three layers, H = 4 query heads over KV = 2, C = 24, F = 20, V = 7; float64.
std::shared_ptr<SequenceModel> grouped_model() {
  std::shared_ptr<SequenceModel> model =
      make_sequence_model("decoder", {.vocab_size = 7,
                                      .max_len = 9,
                                      .d_model = 24,
                                      .num_layers = 3,
                                      .seed = 21,
                                      .attention = {.num_heads = 4, .num_kv_heads = 2},
                                      .feed_forward = {.d_ff = 20}});
  model->to(DType::Float64);
  model->eval();
  return model;
}

SequenceBatch batch_of(const SequenceModel& model, std::vector<int64_t> values) {
  return model.make_batch(Indices({2, 6}, std::move(values)), 2);
}

// The last position's logit of token 1 minus token 4, summed over the batch.
double metric(const Tensor& logits) {
  const std::vector<double> v = logits.to_vector();
  const int64_t T = logits.size(1), V = logits.size(2);
  double total = 0;
  for (int64_t b = 0; b < logits.size(0); ++b) {
    const size_t row = static_cast<size_t>((b * T + T - 1) * V);
    total += v[row + 1] - v[row + 4];
  }
  return total;
}

TEST(PathPatching, ASenderIntoEveryLaterInputIsActivationPatchingOfIt) {
  const auto model = grouped_model();
  const SequenceBatch clean = batch_of(*model, {1, 2, 0, 1, 2, 3, 4, 5, 0, 4, 5, 6});
  const SequenceBatch corrupt = batch_of(*model, {3, 6, 0, 1, 2, 3, 6, 5, 0, 4, 5, 6});
  const std::vector<HookPointInfo> points = hook_points(*model, corrupt);
  for (const auto& [spec, site] :
       {std::pair{"0.2 -> 0.mlp, 1.0, 1.1, 1.2, 1.3, 1.mlp, 2.0, 2.1, 2.2, 2.3, 2.mlp, logits",
                  PatchSite{"blocks.0.attn.hook_result", 2}},
        std::pair{"1.mlp -> 2.0, 2.1.q, 2.2.q, 2.3.q, 2.1.k, 2.1.v, 2.mlp, logits",
                  PatchSite{"blocks.1.hook_mlp_out"}}}) {
    const PathPatchResult path =
        patch_path(*model, clean, corrupt, parse_path(spec, points), metric);
    const PatchedMetrics activation = patch_each(*model, clean, corrupt, {site}, metric);
    const double want =
        (activation.patched[0] - activation.corrupt) / (activation.clean - activation.corrupt);
    EXPECT_NEAR(path.score(), want, 1e-12) << spec;
    EXPECT_GT(std::abs(want), 1e-3) << spec << ": the sender must matter for the test to";
    EXPECT_NEAR(path.clean, activation.clean, 1e-12);
    EXPECT_NEAR(path.corrupt, activation.corrupt, 1e-12);
  }
}

// Prompts that do not differ: every difference is 0, and the patched run is the corrupted run.
TEST(PathPatching, IdenticalPromptsLeaveTheCorruptedRunExactly) {
  const auto model = grouped_model();
  const SequenceBatch clean = batch_of(*model, {1, 2, 0, 1, 2, 3, 4, 5, 0, 4, 5, 6});
  const SequenceBatch corrupt = batch_of(*model, {1, 2, 0, 1, 2, 3, 4, 5, 0, 4, 5, 6});
  const std::vector<HookPointInfo> points = hook_points(*model, corrupt);
  const PathPatchResult same =
      patch_path(*model, clean, corrupt, parse_path("0.1, 1.mlp -> logits", points), metric);
  EXPECT_EQ(same.patched, same.corrupt);
}

// A two-layer attention-only model with a planted circuit (V = 6 tokens, 6 positions, C = 18,
// H = 2, D = 9; no norm, no biases): head 0.0 attends to the previous position and writes its
// token into a "previous token" subspace; head 1.1 attends from the current token to the position
// whose previous token it is, and copies that position's token to the logits. The other heads
// are zero. Scores of 10^2 / sqrt(9) make both patterns one-hot to exp(-33).
std::shared_ptr<SequenceModel> planted_induction() {
  constexpr int64_t V = 6, P = 6, D = 9, previous = V + P;  // the subspaces' offsets
  std::shared_ptr<SequenceModel> model =
      make_sequence_model("decoder", {.vocab_size = V,
                                      .max_len = P,
                                      .d_model = 18,
                                      .num_layers = 2,
                                      .bias = false,
                                      .attention = {.num_heads = 2},
                                      .norm = {.kind = kNoNorm},
                                      .feed_forward = {.d_ff = 0}});
  model->to(DType::Float64);
  model->eval();
  std::map<std::string, Tensor> parameters;
  for (auto& [name, value] : model->named_parameters()) {
    std::fill_n(value.mutable_data<double>(), value.numel(), 0.0);
    parameters.emplace(name, value);
  }
  // weight[row, column] of a [rows, 18] or [V, 18] matrix.
  const auto set = [&](const std::string& name, int64_t row, int64_t column, double value) {
    Tensor& t = parameters.at(name);
    t.mutable_data<double>()[row * t.size(1) + column] = value;
  };
  const double s = 10;
  for (int64_t t = 0; t < V; ++t) {
    set("embed.token_embedding.weight", t, t, 1);
    set("head.weight", t, t, 1);
    set("blocks.0.attn.v_proj.weight", t, t, 1);                 // head 0 reads the token
    set("blocks.0.attn.out_proj.weight", previous + t, t, 1);    // and writes it as previous
    set("blocks.1.attn.q_proj.weight", D + t, t, s);             // head 1 asks for its token
    set("blocks.1.attn.k_proj.weight", D + t, previous + t, s);  // among previous tokens
    set("blocks.1.attn.v_proj.weight", D + t, t, 1);
    set("blocks.1.attn.out_proj.weight", t, D + t, 10);
  }
  for (int64_t p = 0; p < P; ++p) {
    set("embed.position_embedding.weight", p, V + p, 1);
    set("blocks.0.attn.q_proj.weight", p, V + p, s);  // position p asks for p - 1
    if (p + 1 < D) set("blocks.0.attn.k_proj.weight", p + 1, V + p, s);
  }
  return model;
}

// Token 1 of the logits minus token 3 at the last position: the clean prompt's answer (1)
// against the corrupted prompt's changed token (3).
double induction_metric(const Tensor& logits) {
  const std::vector<double> v = logits.to_vector();
  const int64_t T = logits.size(1), V = logits.size(2);
  return v[(T - 1) * V + 1] - v[(T - 1) * V + 3];
}

TEST(PathPatching, APlantedInductionCircuitRunsThroughTheKeys) {
  const auto model = planted_induction();
  // "S A B C A": the last A's induction head finds B after the earlier A. The corrupted prompt
  // changes that A to D, so that no previous token matches and the head attends evenly.
  const SequenceBatch clean = model->make_batch(Indices({1, 6}, {5, 0, 1, 2, 0, 1}), 2);
  const SequenceBatch corrupt = model->make_batch(Indices({1, 6}, {5, 3, 1, 2, 0, 1}), 2);
  const std::vector<HookPointInfo> points = hook_points(*model, corrupt);
  const auto score = [&](const std::string& spec) {
    return patch_path(*model, clean, corrupt, parse_path(spec, points), induction_metric);
  };
  const PathPatchResult keys = score("0.0 -> 1.1.k");
  EXPECT_NEAR(keys.clean, 10, 1e-9);
  EXPECT_NEAR(keys.corrupt, 0, 1e-9);
  EXPECT_NEAR(keys.score(), 1, 1e-9);
  EXPECT_NEAR(score("0.0 -> 1.1.q").score(), 0, 1e-12);
  EXPECT_NEAR(score("0.0 -> 1.1.v").score(), 0, 1e-12);
  EXPECT_NEAR(score("0.1 -> 1.1.k").score(), 0, 1e-12);  // the zero head carries nothing
}

TEST(PathPatching, BadSpecsAreOneLineErrorsNamingTheSpec) {
  const auto model = grouped_model();
  const std::vector<HookPointInfo> points =
      hook_points(*model, batch_of(*model, {1, 2, 0, 1, 2, 3, 4, 5, 0, 4, 5, 6}));
  for (const auto& [spec, message] : std::vector<std::pair<std::string, std::string>>{
           {"0.4 -> logits", "path '0.4 -> logits': '0.4': unknown head 4 (layer 0 has heads 0-3)"},
           {"5.1 -> logits", "'5.1': no layer 5 (layers 0-2)"},
           {"1.0 -> 0.1.k", "receiver 0.1.k comes before every sender"},
           {"1.0 -> 1.3.q", "receiver 1.3.q comes before every sender"},
           {"0.0 -> 1.2.k", "unknown K/V head 2 (layer 1 has K/V heads 0-1)"},
           {"0.0 logits", "not 'SENDERS -> RECEIVERS'"},
           {"0.0 -> 1.1.x", "receiver '1.1.x' reads q, k or v, not 'x'"},
           {"0.attn -> logits", "'0.attn': unknown head attn"},
           {"0.0 -> ", "receiver '' is not"}}) {
    try {
      parse_path(spec, points);
      ADD_FAILURE() << spec << ": no error";
    } catch (const ConfigError& e) {
      EXPECT_TRUE(contains(e.what(), message)) << e.what();
      EXPECT_TRUE(contains(e.what(), "path '" + spec + "'")) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  }
}

}  // namespace test_path_patching
}  // namespace gradlab::interp
