// Ablation of every head and feed-forward sublayer, one at a time, through hooks over the
// held-out evaluation.
#include "interp/ablation.h"

#include <algorithm>
#include <map>

#include "autograd/graph.h"
#include "autograd/ops.h"
#include "nn/hooks.h"

namespace gradlab::interp {
namespace {

constexpr const char* kHeadPoint = "*hook_z";               // [B, Tq, H, D]
constexpr const char* kFeedForwardPoint = "*hook_mlp_out";  // [B, T, C]
constexpr int64_t kHeadAxis = 2;

// 0 at the heads listed, 1 elsewhere, along axis 2 of a [1, 1, H, 1] mask (or the reverse with
// listed_ones).
Tensor head_mask(const Tensor& z, const std::vector<int64_t>& heads, bool listed_ones) {
  std::vector<double> mask(static_cast<size_t>(z.size(kHeadAxis)), listed_ones ? 0.0 : 1.0);
  for (const int64_t head : heads) mask[static_cast<size_t>(head)] = listed_ones ? 1.0 : 0.0;
  return Tensor::from_vector(mask, {1, 1, z.size(kHeadAxis), 1}, z.dtype());
}

// The mean over the held-out sequences of every point filter matches, at each position:
// [1, ...] per point, from one evaluation that reads them.
std::map<std::string, Tensor> heldout_means(train::Trainer& trainer, const nn::HookFilter& filter) {
  std::map<std::string, Tensor> sums;
  const nn::HookFunction add = [&](const Tensor& activation, const std::string& name) {
    const Tensor row_sum = sum(activation, {0}, true);
    auto [it, added] = sums.emplace(name, row_sum);
    if (!added) it->second = it->second + row_sum;
    return Tensor();
  };
  {
    nn::HookScope reading(trainer.model(), trainer.heldout(), {{filter, add}});
    trainer.evaluate();
  }
  const double rows = static_cast<double>(trainer.heldout().inputs.shape[0]);
  for (auto& [_, total] : sums) total = total * (1.0 / rows);
  return sums;
}

}  // namespace

const std::vector<AblationModeRow>& ablation_modes() {
  static const std::vector<AblationModeRow> rows{
      {"zero", AblationMode::zero, "the part's output set to zero"},
      {"mean", AblationMode::mean,
       "the part's output set to its mean over the held-out sequences, at each position"},
  };
  return rows;
}

std::vector<ModelPart> model_parts(train::Trainer& trainer) {
  std::vector<ModelPart> parts;
  for (const nn::HookPointInfo& point : nn::hook_points(trainer.model(), trainer.heldout())) {
    if (nn::HookFilter(kHeadPoint).matches(point.name)) {
      for (int64_t head = 0; head < point.shape[kHeadAxis]; ++head) {
        parts.push_back({point.name, head});
      }
    } else if (nn::HookFilter(kFeedForwardPoint).matches(point.name)) {
      parts.push_back({point.name, -1});
    }
  }
  return parts;
}

namespace {

// One hook per point of `parts`: a feed-forward output replaced whole, a z's listed heads
// replaced, its other heads kept. The replacement is zero or (mode mean) the point's held-out
// mean from `means`.
std::vector<nn::Hook> knock_out(const std::vector<ModelPart>& parts, AblationMode mode,
                                const std::map<std::string, Tensor>& means) {
  std::map<std::string, std::vector<int64_t>> heads_of;  // point -> heads (empty: the whole)
  for (const ModelPart& part : parts) {
    std::vector<int64_t>& heads = heads_of[part.point];
    if (part.head >= 0) heads.push_back(part.head);
  }
  std::vector<nn::Hook> hooks;
  for (const auto& [point, heads] : heads_of) {
    hooks.push_back(
        {point, [heads, mode, &means](const Tensor& activation, const std::string& name) {
           const bool mean = mode == AblationMode::mean;
           if (heads.empty()) {
             const Tensor zero = Tensor::zeros(activation.shape(), activation.dtype());
             return mean ? zero + means.at(name) : zero;
           }
           const Tensor kept = activation * head_mask(activation, heads, false);
           return mean ? kept + means.at(name) * head_mask(activation, heads, true) : kept;
         }});
  }
  return hooks;
}

nn::HookFilter points_of(const std::vector<ModelPart>& parts) {
  std::vector<std::string> points;
  for (const ModelPart& part : parts) points.push_back(part.point);
  return nn::HookFilter(
      [points](const std::string& name) {
        return std::find(points.begin(), points.end(), name) != points.end();
      },
      "the parts' points");
}

train::Metrics knocked_out_evaluation(train::Trainer& trainer, AblationMode mode,
                                      const std::vector<ModelPart>& parts,
                                      const std::map<std::string, Tensor>& means) {
  NoGradGuard no_grad;
  nn::HookScope ablated(trainer.model(), trainer.heldout(), knock_out(parts, mode, means));
  return trainer.evaluate();
}

std::map<std::string, Tensor> means_for(train::Trainer& trainer, AblationMode mode,
                                        const std::vector<ModelPart>& parts) {
  return mode == AblationMode::mean ? heldout_means(trainer, points_of(parts))
                                    : std::map<std::string, Tensor>{};
}

}  // namespace

AblationResults ablate_each_part(train::Trainer& trainer, AblationMode mode) {
  AblationResults results;
  results.intact = trainer.evaluate();
  const std::vector<ModelPart> parts = model_parts(trainer);
  const std::map<std::string, Tensor> means = means_for(trainer, mode, parts);
  for (const ModelPart& part : parts) {
    results.parts.push_back({part, knocked_out_evaluation(trainer, mode, {part}, means)});
  }
  return results;
}

train::Metrics ablate_together(train::Trainer& trainer, AblationMode mode,
                               const std::vector<ModelPart>& parts) {
  return knocked_out_evaluation(trainer, mode, parts, means_for(trainer, mode, parts));
}

}  // namespace gradlab::interp
