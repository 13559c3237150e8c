// Ablation of heads and feed-forward sublayers: the parts of a model, their held-out means, and
// the hooks that knock them out.
#include "interp/ablation.h"

#include <algorithm>

#include "autograd/ops.h"

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

nn::HookFilter points_of(const std::vector<ModelPart>& parts) {
  std::vector<std::string> points;
  for (const ModelPart& part : parts) points.push_back(part.point);
  return nn::HookFilter(
      [points](const std::string& name) {
        return std::find(points.begin(), points.end(), name) != points.end();
      },
      "the parts' points");
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

std::vector<ModelPart> model_parts(const nn::SequenceModel& model,
                                   const nn::SequenceBatch& heldout) {
  std::vector<ModelPart> parts;
  for (const nn::HookPointInfo& point : nn::hook_points(model, heldout)) {
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

std::map<std::string, Tensor> ablation_means(const nn::SequenceModel& model,
                                             const nn::SequenceBatch& heldout,
                                             const std::function<void()>& evaluate,
                                             AblationMode mode,
                                             const std::vector<ModelPart>& parts) {
  std::map<std::string, Tensor> sums;
  if (mode != AblationMode::mean) return sums;
  const nn::HookFunction add = [&](const Tensor& activation, const std::string& name) {
    const Tensor row_sum = sum(activation, {0}, true);
    auto [it, added] = sums.emplace(name, row_sum);
    if (!added) it->second = it->second + row_sum;
    return Tensor();
  };
  {
    nn::HookScope reading(model, heldout, {{points_of(parts), add}});
    evaluate();
  }
  const double rows = static_cast<double>(heldout.inputs.shape[0]);
  for (auto& [_, total] : sums) total = total * (1.0 / rows);
  return sums;
}

std::vector<nn::Hook> knock_out(const std::vector<ModelPart>& parts, AblationMode mode,
                                const std::map<std::string, Tensor>& means) {
  std::map<std::string, std::vector<int64_t>> heads_of;  // point -> heads (empty: the whole)
  for (const ModelPart& part : parts) {
    std::vector<int64_t>& heads = heads_of[part.point];
    if (part.head >= 0) heads.push_back(part.head);
  }
  std::vector<nn::Hook> hooks;
  for (const auto& [point, heads] : heads_of) {
    const Tensor mean = mode == AblationMode::mean ? means.at(point) : Tensor();
    hooks.push_back({point, [heads, mean](const Tensor& activation, const std::string&) {
                       if (heads.empty()) {
                         const Tensor zero = Tensor::zeros(activation.shape(), activation.dtype());
                         return mean.defined() ? zero + mean : zero;
                       }
                       const Tensor kept = activation * head_mask(activation, heads, false);
                       return mean.defined() ? kept + mean * head_mask(activation, heads, true)
                                             : kept;
                     }});
  }
  return hooks;
}

}  // namespace gradlab::interp
