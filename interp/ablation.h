// Knocking out parts of a trained model: an attention head (its z, the head's output before W_O,
// set to zero or to its mean over the held-out set) or a feed-forward sublayer (its output
// likewise), scored on the held-out set against the intact model: each part in turn, or a chosen
// set of parts at once. What `gradlab ablate` prints; through nn::HookScope, so the model code is
// unchanged.
#pragma once

#include <string>
#include <vector>

#include "train/trainer.h"

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

struct AblatedPart : ModelPart {
  train::Metrics metrics;  // on the held-out set with this part knocked out
};

// Every part of trainer's model, in forward order: each attention's heads, each block's ffn.
std::vector<ModelPart> model_parts(train::Trainer& trainer);

struct AblationResults {
  train::Metrics intact;           // Trainer::evaluate() of the model as it is
  std::vector<AblatedPart> parts;  // in forward order: each attention's heads, each block's ffn
};

// Evaluates trainer's held-out set with each part knocked out in turn. The mean of a part is
// taken over the held-out sequences at each position ([Tq, H, D] for z, [T, C] for the
// feed-forward output), so that mean ablation keeps what a part says on average and removes
// what it says about this sequence. Runs on the calling thread's hooks; one process.
AblationResults ablate_each_part(train::Trainer& trainer, AblationMode mode);

// The held-out metrics with every one of `parts` knocked out at once (means as above). Heads that
// do the same work (say, several induction heads) hide each other when knocked out one at a
// time; together they show what the set does.
train::Metrics ablate_together(train::Trainer& trainer, AblationMode mode,
                               const std::vector<ModelPart>& parts);

}  // namespace gradlab::interp
