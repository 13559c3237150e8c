// Ablation of every head and feed-forward sublayer, one at a time, through hooks over the
// held-out evaluation.
#include "train/ablation.h"

#include <map>

#include "autograd/graph.h"
#include "autograd/ops.h"
#include "nn/hooks.h"

namespace gradlab::train {
namespace {

constexpr const char* kHeadPoint = "*hook_z";               // [B, Tq, H, D]
constexpr const char* kFeedForwardPoint = "*hook_mlp_out";  // [B, T, C]
constexpr int64_t kHeadAxis = 2;

// 1 at `head` of axis 2 of a [1, 1, H, 1] mask, 0 elsewhere (or the reverse with keep_others).
Tensor head_mask(const Tensor& z, int64_t head, bool keep_others) {
  std::vector<double> mask(static_cast<size_t>(z.size(kHeadAxis)), keep_others ? 1.0 : 0.0);
  mask[static_cast<size_t>(head)] = keep_others ? 0.0 : 1.0;
  return Tensor::from_vector(mask, {1, 1, z.size(kHeadAxis), 1}, z.dtype());
}

// The mean over the held-out sequences of every point filter matches, at each position:
// [1, ...] per point, from one evaluation that reads them.
std::map<std::string, Tensor> heldout_means(Trainer& trainer, const nn::HookFilter& filter) {
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

AblationResults ablate_each_part(Trainer& trainer, AblationMode mode) {
  const nn::SequenceModel& model = trainer.model();
  const nn::SequenceBatch& heldout = trainer.heldout();
  AblationResults results;
  results.intact = trainer.evaluate();
  const nn::HookFilter parts_filter(
      [](const std::string& name) {
        return nn::HookFilter(kHeadPoint).matches(name) ||
               nn::HookFilter(kFeedForwardPoint).matches(name);
      },
      std::string(kHeadPoint) + " or " + kFeedForwardPoint);
  const std::map<std::string, Tensor> means = mode == AblationMode::mean
                                                  ? heldout_means(trainer, parts_filter)
                                                  : std::map<std::string, Tensor>{};
  NoGradGuard no_grad;
  for (const nn::HookPointInfo& point : nn::hook_points(model, heldout)) {
    if (!parts_filter.matches(point.name)) continue;
    const bool head_point = nn::HookFilter(kHeadPoint).matches(point.name);
    const int64_t heads = head_point ? point.shape[kHeadAxis] : 1;
    for (int64_t head = 0; head < heads; ++head) {
      const nn::HookFunction knock_out = [&](const Tensor& activation, const std::string& name) {
        if (!head_point) {
          const Tensor zero = Tensor::zeros(activation.shape(), activation.dtype());
          return mode == AblationMode::zero ? zero : zero + means.at(name);
        }
        const Tensor kept = activation * head_mask(activation, head, true);
        return mode == AblationMode::zero
                   ? kept
                   : kept + means.at(name) * head_mask(activation, head, false);
      };
      nn::HookScope ablated(model, heldout, {{point.name, knock_out}});
      results.parts.push_back({point.name, head_point ? head : -1, trainer.evaluate()});
    }
  }
  return results;
}

}  // namespace gradlab::train
