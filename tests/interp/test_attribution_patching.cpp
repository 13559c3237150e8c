// Attribution patching (interp/attribution_patching.h): exact where the metric is linear in the
// activation, and elsewhere the dot product of the activations' difference with the gradient of
// the corrupted run, computed here from a cache, a backward hook and central differences.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "autograd/error.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "interp/attribution_patching.h"
#include "nn/models.h"
#include "tests/test_helpers.h"

namespace gradlab::interp {
namespace test_attribution_patching {

using namespace gradlab::nn;

using testing::contains;

std::shared_ptr<SequenceModel> model_of(const std::string& norm) {
  ModelConfig config{.vocab_size = 7,
                     .max_len = 9,
                     .d_model = 12,
                     .num_layers = 2,
                     .seed = 11,
                     .attention = {.num_heads = 4},
                     .feed_forward = {.d_ff = 20}};
  config.norm.kind = norm;
  std::shared_ptr<SequenceModel> model = make_sequence_model("decoder", config);
  model->to(DType::Float64);
  model->eval();
  return model;
}

// T = 6; the prompts differ at position 1.
SequenceBatch clean_of(const SequenceModel& m) {
  return m.make_batch(Indices({1, 7}, {1, 2, 3, 0, 1, 2, 3}), 3);
}
SequenceBatch corrupt_of(const SequenceModel& m) {
  return m.make_batch(Indices({1, 7}, {1, 5, 3, 0, 1, 5, 3}), 3);
}

// A logit difference at the last two positions: linear in the logits.
Tensor weights_like(const Tensor& logits) {  // [1, T, V]
  std::vector<double> w(static_cast<size_t>(logits.numel()), 0.0);
  const int64_t t = logits.size(1), v = logits.size(2);
  w[static_cast<size_t>((t - 1) * v + 2)] = 1;
  w[static_cast<size_t>((t - 1) * v + 5)] = -1;
  w[static_cast<size_t>((t - 2) * v + 3)] = 0.5;
  return Tensor::from_vector(w, logits.shape(), logits.dtype());
}
Tensor logit_difference(const Tensor& logits) {
  return sum(logits * weights_like(logits));
}
double logit_difference_value(const Tensor& logits) {
  return logit_difference(logits.detach()).item();
}

std::vector<PatchSite> sites_of(const SequenceModel& m, const std::string& point,
                                bool per_position) {
  return patch_sites(hook_points(m, corrupt_of(m)), point, per_position);
}

TEST(AttributionPatching, EqualsActivationPatchingWhereTheMetricIsLinear) {
  const auto m = model_of(kNoNorm);  // no final norm: the logits are linear in the residual
  std::vector<PatchSite> sites = sites_of(*m, "hook_logits", true);
  for (const PatchSite& s : sites_of(*m, "blocks.1.hook_resid_post", true)) sites.push_back(s);
  sites.push_back({"blocks.1.hook_resid_post"});
  const AttributedMetrics estimated =
      attribute_each(*m, clean_of(*m), corrupt_of(*m), sites, logit_difference);
  const PatchedMetrics exact =
      patch_each(*m, clean_of(*m), corrupt_of(*m), sites, logit_difference_value);
  EXPECT_NEAR(estimated.clean, exact.clean, 1e-12);
  EXPECT_NEAR(estimated.corrupt, exact.corrupt, 1e-12);
  ASSERT_EQ(estimated.estimated.size(), sites.size());
  int moved = 0;
  for (size_t i = 0; i < sites.size(); ++i) {
    EXPECT_NEAR(estimated.estimated[i], exact.patched[i], 1e-12)
        << sites[i].point << " position " << sites[i].position;
    moved += std::abs(exact.patched[i] - exact.corrupt) > 1e-6;
  }
  EXPECT_GT(moved, 4) << "sites that change the metric";

  // Before the last attention and feed-forward, the metric is not linear: an estimate only.
  const std::vector<PatchSite> early = {{"blocks.0.hook_resid_post"}};
  const double estimate =
      attribute_each(*m, clean_of(*m), corrupt_of(*m), early, logit_difference).estimated[0];
  const double patched =
      patch_each(*m, clean_of(*m), corrupt_of(*m), early, logit_difference_value).patched[0];
  EXPECT_GT(std::abs(estimate - patched), 1e-6);
}

// 1 where an element of a point's activation of this shape belongs to the site, else 0.
std::vector<double> site_mask(const Shape& shape, const PatchSite& site, int64_t head_axis,
                              int64_t position_axis) {
  int64_t count = 1;
  for (const int64_t size : shape) count *= size;
  std::vector<double> mask(static_cast<size_t>(count), 0.0);
  for (int64_t i = 0; i < count; ++i) {
    std::vector<int64_t> index(shape.size());
    for (int64_t rest = i, axis = static_cast<int64_t>(shape.size()) - 1; axis >= 0; --axis) {
      index[static_cast<size_t>(axis)] = rest % shape[static_cast<size_t>(axis)];
      rest /= shape[static_cast<size_t>(axis)];
    }
    const bool head = site.head < 0 || index[static_cast<size_t>(head_axis)] == site.head;
    const bool position =
        site.position < 0 || index[static_cast<size_t>(position_axis)] == site.position;
    mask[static_cast<size_t>(i)] = head && position ? 1 : 0;
  }
  return mask;
}

// sum over the mask of (clean - corrupt) * gradient.
double masked_dot(const Tensor& clean, const Tensor& corrupt, const Tensor& gradient,
                  const std::vector<double>& mask) {
  const std::vector<double> a = clean.to_vector(), b = corrupt.to_vector(),
                            g = gradient.to_vector();
  double total = 0;
  for (size_t i = 0; i < mask.size(); ++i) total += mask[i] * (a[i] - b[i]) * g[i];
  return total;
}

// A point's activation in a run of batch and the gradient of the metric there.
std::pair<Tensor, Tensor> value_and_gradient(const SequenceModel& m, const SequenceBatch& batch,
                                             const std::string& point) {
  Tensor value, gradient;
  const Tensor logits = run_with_hooks(m, batch,
                                       {{point,
                                         [&value](const Tensor& a, const std::string&) {
                                           value = a.detach().clone();
                                           return Tensor();
                                         }},
                                        {point,
                                         [&gradient](const Tensor& g, const std::string&) {
                                           gradient = g.clone();
                                           return Tensor();
                                         },
                                         HookDirection::Backward}});
  logit_difference(logits).backward();
  return {value, gradient};
}

TEST(AttributionPatching, EstimatesAreTheCorruptedRunsGradientDottedWithTheDifference) {
  const auto m = model_of(kLayerNorm);
  const SequenceBatch clean = clean_of(*m), corrupt = corrupt_of(*m);
  for (const auto& [point, head_axis, position_axis] :
       std::vector<std::tuple<std::string, int64_t, int64_t>>{{"blocks.1.attn.hook_z", 2, 1},
                                                              {"blocks.0.hook_mlp_out", -1, 1}}) {
    const std::vector<PatchSite> sites = sites_of(*m, point, true);
    const AttributedMetrics r = attribute_each(*m, clean, corrupt, sites, logit_difference);
    const auto [clean_value, clean_gradient] = value_and_gradient(*m, clean, point);
    const auto [corrupt_value, corrupt_gradient] = value_and_gradient(*m, corrupt, point);
    m->zero_grad();
    int differs_from_the_clean_runs_gradient = 0;
    for (size_t i = 0; i < sites.size(); ++i) {
      const std::vector<double> mask =
          site_mask(corrupt_value.shape(), sites[i], head_axis, position_axis);
      const double dot = masked_dot(clean_value, corrupt_value, corrupt_gradient, mask);
      EXPECT_NEAR(r.estimated[i] - r.corrupt, dot, 1e-12)
          << point << " head " << sites[i].head << " position " << sites[i].position;
      const double other = masked_dot(clean_value, corrupt_value, clean_gradient, mask);
      differs_from_the_clean_runs_gradient += std::abs(other - dot) > 1e-8;
    }
    EXPECT_GT(differs_from_the_clean_runs_gradient, 0) << point;

    // The same directional derivative by central differences, along the difference of the last
    // site's part.
    const Tensor mask = Tensor::from_vector(
        site_mask(corrupt_value.shape(), sites.back(), head_axis, position_axis),
        corrupt_value.shape(), DType::Float64);
    const Tensor direction = (clean_value - corrupt_value) * mask;
    auto shifted = [&](double step) {
      return logit_difference_value(run_with_hooks(
          *m, corrupt,
          {{point, [&](const Tensor& a, const std::string&) { return a + direction * step; }}}));
    };
    const double h = 1e-5;
    EXPECT_NEAR(r.estimated.back() - r.corrupt, (shifted(h) - shifted(-h)) / (2 * h), 1e-7)
        << point;
  }
}

TEST(AttributionPatching, LeavesTheParametersGradientsAndRefusesWhatItCannotDo) {
  const auto m = model_of(kLayerNorm);
  const std::vector<PatchSite> sites = {{"blocks.0.hook_resid_post"}};
  attribute_each(*m, clean_of(*m), corrupt_of(*m), sites, logit_difference);
  for (const auto& [name, parameter] : m->named_parameters()) {
    EXPECT_FALSE(parameter.grad().defined()) << name;
  }
  const SequenceBatch longer = m->make_batch(Indices({1, 8}, {1, 2, 3, 4, 0, 1, 2, 3}), 4);
  try {
    attribute_each(*m, clean_of(*m), longer, sites, logit_difference);
    FAIL() << "expected a ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(contains(e.what(), "[1,6]") && contains(e.what(), "[1,7]")) << e.what();
  }
  NoGradGuard no_grad;
  try {
    attribute_each(*m, clean_of(*m), corrupt_of(*m), sites, logit_difference);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "grad mode")) << e.what();
  }
}

TEST(AttributionPatching, RanksBySizeEitherWayAndCorrelates) {
  EXPECT_EQ(top_indices({0.1, -0.9, 0.5, 0.0}, 0.0, 2), (std::vector<size_t>{1, 2}));
  EXPECT_EQ(top_indices({1.1, 1.0, 3.0}, 1.0, 5), (std::vector<size_t>{2, 0, 1}));
  EXPECT_NEAR(correlation({1, 2, 3}, {1, 3, 2}), 0.5, 1e-15);  // 1 / sqrt(2 * 2)
  EXPECT_NEAR(correlation({1, 2, 3}, {2, 4, 6}), 1.0, 1e-15);
  EXPECT_NEAR(correlation({1, 2, 3}, {3, 2, 1}), -1.0, 1e-15);
  EXPECT_TRUE(std::isnan(correlation({1}, {2})));
  EXPECT_TRUE(std::isnan(correlation({1, 1}, {2, 3})));
}

}  // namespace test_attribution_patching
}  // namespace gradlab::interp
