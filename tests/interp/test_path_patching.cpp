// Path patching (interp/path_patching.h): a sender patched into every later input equals
// activation patching of that sender, a path to nothing that differs scores 0, and bad specs
// are one-line errors naming the spec.
#include <gtest/gtest.h>

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
