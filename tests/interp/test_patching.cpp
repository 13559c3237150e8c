// Activation patching (interp/patching.h): its sites along the axes a point's letters name, and its
// runs against what they must equal: the clean run where a patch carries everything, the
// corrupted run where it carries nothing, and a patched head built by hand otherwise.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "autograd/error.h"
#include "autograd/ops.h"
#include "interp/patching.h"
#include "nn/models.h"
#include "tests/test_helpers.h"

namespace gradlab::interp {
namespace test_patching {

// The instruments' tests build and run models of nn/ throughout.
using namespace gradlab::nn;

using testing::contains;

ModelConfig config(int64_t num_kv_heads = 0) {
  return {.vocab_size = 7,
          .max_len = 9,
          .d_model = 12,
          .num_layers = 2,
          .seed = 5,
          .attention = {.num_heads = 4, .num_kv_heads = num_kv_heads},
          .feed_forward = {.d_ff = 20}};
}

std::shared_ptr<SequenceModel> model_of(const std::string& kind, DType dtype,
                                        int64_t num_kv_heads = 0) {
  std::shared_ptr<SequenceModel> model = make_sequence_model(kind, config(num_kv_heads));
  model->to(dtype);
  model->eval();
  return model;
}

// One sample each, prompts of 3 tokens that differ in their second token: T = 6.
SequenceBatch clean_of(const SequenceModel& m) {
  return m.make_batch(Indices({1, 7}, {1, 2, 3, 0, 1, 2, 3}), 3);
}
SequenceBatch corrupt_of(const SequenceModel& m) {
  return m.make_batch(Indices({1, 7}, {1, 5, 3, 0, 1, 5, 3}), 3);
}

// A metric that sees every logit: any change of any logit moves it.
double logit_sum(const Tensor& logits) {
  return sum(logits.to(DType::Float64)).item();
}

PatchedMetrics patch(const SequenceModel& m, const std::vector<PatchSite>& sites) {
  return patch_each(m, clean_of(m), corrupt_of(m), sites, logit_sum);
}

TEST(Patching, AWholePointCarriesTheCleanRunAndAnUnchangedOneNothing) {
  for (const char* kind : {"decoder", "seq2seq"}) {
    for (DType dtype : {DType::Float32, DType::Float64}) {
      const auto m = model_of(kind, dtype);
      const std::string first = std::string(kind) == "decoder" ? "blocks.0" : "decoder.0";
      const PatchedMetrics r =
          patch(*m, {{"hook_logits"}, {first + ".hook_resid_pre"}, {"embed.hook_position"}});
      EXPECT_NE(r.clean, r.corrupt);
      EXPECT_EQ(r.clean, logit_sum(m->forward(clean_of(*m)))) << kind;
      EXPECT_EQ(r.patched[0], r.clean) << kind;
      if (std::string(kind) == "decoder") {
        EXPECT_EQ(r.patched[1], r.clean);
      }
      EXPECT_EQ(r.patched[2], r.corrupt) << kind << ": the positions are the same in both runs";
    }
  }
}

TEST(Patching, APositionWhereTheInputsAgreeCarriesNothing) {
  const auto m = model_of("decoder", DType::Float64);
  const PatchedMetrics r = patch(*m, {{"blocks.0.hook_resid_pre", -1, 0},
                                      {"blocks.0.hook_resid_pre", -1, 1},
                                      {"blocks.0.hook_resid_pre", -1, 2}});
  EXPECT_EQ(r.patched[0], r.corrupt);
  EXPECT_NE(r.patched[1], r.corrupt) << "position 1 reads 2 in the clean run, 5 in the other";
  EXPECT_EQ(r.patched[2], r.corrupt);
}

TEST(Patching, AHeadSiteEqualsThatHeadPatchedByHand) {
  const auto m = model_of("decoder", DType::Float64, 2);
  const SequenceBatch clean = clean_of(*m), corrupt = corrupt_of(*m);
  // Layer 0's values differ where the inputs do (position 1); layer 1's z wherever a query sees
  // position 1.
  for (const auto& [point, position] : std::vector<std::pair<std::string, int64_t>>{
           {"blocks.1.attn.hook_z", 3}, {"blocks.0.attn.hook_v", 1}}) {
    const ActivationCache values = run_with_cache(*m, clean, point);
    const int64_t axis = 2;  // H of [B, Tq, H, D], KV of [B, Tk, KV, D]
    const int64_t heads = values.at(point).size(axis);
    for (int64_t head = 0; head < heads; ++head) {
      const PatchedMetrics r = patch(*m, {{point, head, position}});
      // The corrupted activation with head `head` at `position` from the clean one.
      const Tensor logits = run_with_hooks(
          *m, corrupt, {{point, [&](const Tensor& a, const std::string&) {
                           const Tensor from = values.at(point);
                           std::vector<double> site(static_cast<size_t>(a.numel()), 0.0);
                           const int64_t d = a.size(3), width = a.size(2) * d;
                           for (int64_t j = 0; j < d; ++j)
                             site[position * width + head * d + j] = 1;
                           const Tensor mask = Tensor::from_vector(site, a.shape(), a.dtype());
                           return a * (1.0 - mask) + from * mask;
                         }}});
      EXPECT_NEAR(r.patched[0], logit_sum(logits), 1e-12) << point << " head " << head;
      EXPECT_NE(r.patched[0], r.corrupt) << point << " head " << head;
    }
  }
}

TEST(Patching, SitesFollowThePointsHeadsAndPositions) {
  const auto m = model_of("seq2seq", DType::Float32, 2);
  const std::vector<HookPointInfo> points = hook_points(*m, corrupt_of(*m));
  // Source S = 3, decoder T = 3 (the separator and the answer but its last token), H = 4, KV = 2.
  EXPECT_EQ(patch_sites(points, "decoder.0.attn.hook_pattern", false).size(), 4u);
  EXPECT_EQ(patch_sites(points, "decoder.0.attn.hook_pattern", true).size(), 4u * 3u);
  EXPECT_EQ(patch_sites(points, "decoder.0.cross_attn.hook_k", true).size(), 2u * 3u);
  EXPECT_EQ(patch_sites(points, "encoder.1.hook_resid_post", true).size(), 3u);
  EXPECT_EQ(patch_sites(points, "decoder.1.hook_resid_post", false).size(), 1u);
  auto point = [&](const std::string& name) {
    for (const HookPointInfo& info : points) {
      if (info.name == name) return info;
    }
    throw std::logic_error(name);
  };
  EXPECT_TRUE(positions_are_source(point("encoder.0.hook_resid_pre")));
  EXPECT_TRUE(positions_are_source(point("embed.hook_source_token")));
  EXPECT_TRUE(positions_are_source(point("decoder.0.cross_attn.hook_v")));
  EXPECT_FALSE(positions_are_source(point("decoder.0.cross_attn.hook_q")));
  EXPECT_FALSE(positions_are_source(point("decoder.0.cross_attn.hook_pattern")));
  EXPECT_FALSE(positions_are_source(point("decoder.0.attn.hook_k")));
  EXPECT_EQ(head_axis(point("decoder.0.attn.hook_pattern")), 1);
  EXPECT_EQ(position_axis(point("decoder.0.attn.hook_pattern")), 2);
  EXPECT_EQ(position_axis(point("embed.hook_position")), 0);
  EXPECT_EQ(head_axis(point("embed.hook_position")), -1);
}

TEST(Patching, SequencesOfOtherLengthsAndUnknownPointsAreRefused) {
  const auto m = model_of("decoder", DType::Float32);
  const SequenceBatch longer = m->make_batch(Indices({1, 8}, {1, 2, 3, 4, 0, 1, 2, 3}), 4);
  try {
    patch_each(*m, clean_of(*m), longer, {{"hook_logits"}}, logit_sum);
    FAIL() << "expected a ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(contains(e.what(), "[1,6]") && contains(e.what(), "[1,7]")) << e.what();
  }
  try {
    patch_sites(hook_points(*m, clean_of(*m)), "blocks.0.attn.hook_zz", false);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "blocks.0.attn.hook_z")) << e.what();
  }
}

}  // namespace test_patching
}  // namespace gradlab::interp
