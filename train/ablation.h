// Knocking out one part of a trained model at a time: every attention head (its z, the head's
// output before W_O, set to zero or to its mean over the held-out set) and every feed-forward
// sublayer (its output likewise), each scored on the held-out set against the intact model.
// What `gradlab ablate` prints; through nn::HookScope, so the model code is unchanged.
#pragma once

#include <string>
#include <vector>

#include "train/trainer.h"

namespace gradlab::train {

enum class AblationMode { zero, mean };

// --mode of `gradlab ablate`: "zero" or "mean".
struct AblationModeRow {
  const char* name;
  AblationMode id;
  const char* description;
};
const std::vector<AblationModeRow>& ablation_modes();

struct AblatedPart {
  std::string point;  // "blocks.1.attn.hook_z" (a head) or "blocks.1.hook_mlp_out"
  int64_t head = -1;  // the query head, at hook_z; -1 for a feed-forward sublayer
  Metrics metrics;    // on the held-out set with this part knocked out
};

struct AblationResults {
  Metrics intact;                  // Trainer::evaluate() of the model as it is
  std::vector<AblatedPart> parts;  // in forward order: each attention's heads, each block's ffn
};

// Evaluates trainer's held-out set with each part knocked out in turn. The mean of a part is
// taken over the held-out sequences at each position ([Tq, H, D] for z, [T, C] for the
// feed-forward output), so that mean ablation keeps what a part says on average and removes
// what it says about this sequence. Runs on the calling thread's hooks; one process.
AblationResults ablate_each_part(Trainer& trainer, AblationMode mode);

}  // namespace gradlab::train
