// Knocking out parts of a trained model: an attention head (its z, the head's output before W_O,
// set to zero or to its mean over the held-out set) or a feed-forward sublayer (its output
// likewise), scored on the held-out set against the intact model: each part in turn, or a chosen
// set of parts at once. What `gradlab ablate` prints; through nn::HookScope, so the model code is
// unchanged, and through the caller's evaluation, so that any scoring (train::Trainer::evaluate's
// Metrics, say) will do.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "autograd/graph.h"
#include "nn/hooks.h"
#include "nn/sequence_model.h"

namespace gradlab::interp {

enum class AblationMode { zero, mean };

// --mode of `gradlab ablate`: "zero" or "mean".
struct AblationModeRow {
  const char* name;
  AblationMode id;
  const char* description;
};
const std::vector<AblationModeRow>& ablation_modes();

struct ModelPart {
  std::string point;  // "blocks.1.attn.hook_z" (a head) or "blocks.1.hook_mlp_out"
  int64_t head = -1;  // the query head, at hook_z; -1 for a feed-forward sublayer
};

// What an ablation scores: a model, its held-out set, and an evaluation of the model on that set
// (a forward pass of the model over heldout on the calling thread, so that the ablation's hooks
// apply), returning the scores of its choice. train::Trainer gives
// {trainer.model(), trainer.heldout(), [&] { return trainer.evaluate(); }}.
template <class Scores>
struct HeldOutEvaluation {
  const nn::SequenceModel& model;
  const nn::SequenceBatch& heldout;
  std::function<Scores()> evaluate;
};

template <class Scores>
struct AblatedPart : ModelPart {
  Scores metrics;  // on the held-out set with this part knocked out
};

template <class Scores>
struct AblationResults {
  Scores intact;                           // the evaluation of the model as it is
  std::vector<AblatedPart<Scores>> parts;  // in forward order: each attention's heads, each ffn
};

// Every part of model, in forward order: each attention's heads, each block's ffn.
std::vector<ModelPart> model_parts(const nn::SequenceModel& model,
                                   const nn::SequenceBatch& heldout);

// The mean of each point of parts over the held-out sequences at each position ([1, Tq, H, D]
// for z, [1, T, C] for the feed-forward output), read by one run of evaluate; none in mode zero.
std::map<std::string, Tensor> ablation_means(const nn::SequenceModel& model,
                                             const nn::SequenceBatch& heldout,
                                             const std::function<void()>& evaluate,
                                             AblationMode mode,
                                             const std::vector<ModelPart>& parts);

// One hook per point of parts: a feed-forward output replaced whole, a z's listed heads replaced,
// its other heads kept. The replacement is zero or (mode mean) the point's mean from means.
std::vector<nn::Hook> knock_out(const std::vector<ModelPart>& parts, AblationMode mode,
                                const std::map<std::string, Tensor>& means);

// The evaluation with hooks in place.
template <class Scores>
Scores evaluate_with(const HeldOutEvaluation<Scores>& set, std::vector<nn::Hook> hooks) {
  NoGradGuard no_grad;
  nn::HookScope scope(set.model, set.heldout, std::move(hooks));
  return set.evaluate();
}

// The held-out evaluation with each part knocked out in turn. Mean ablation keeps what a part
// says on average and removes what it says about this sequence. One process; the hooks apply on
// the calling thread.
template <class Scores>
AblationResults<Scores> ablate_each_part(const HeldOutEvaluation<Scores>& set, AblationMode mode) {
  AblationResults<Scores> results{set.evaluate(), {}};
  const std::vector<ModelPart> parts = model_parts(set.model, set.heldout);
  const std::map<std::string, Tensor> means = ablation_means(
      set.model, set.heldout, [&] { set.evaluate(); }, mode, parts);
  for (const ModelPart& part : parts) {
    results.parts.push_back({part, evaluate_with(set, knock_out({part}, mode, means))});
  }
  return results;
}

// The held-out evaluation with every one of parts knocked out at once (means as above). Heads
// that do the same work (say, several induction heads) hide each other when knocked out one at a
// time; together they show what the set does.
template <class Scores>
Scores ablate_together(const HeldOutEvaluation<Scores>& set, AblationMode mode,
                       const std::vector<ModelPart>& parts) {
  const std::map<std::string, Tensor> means = ablation_means(
      set.model, set.heldout, [&] { set.evaluate(); }, mode, parts);
  return evaluate_with(set, knock_out(parts, mode, means));
}

}  // namespace gradlab::interp
