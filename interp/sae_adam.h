// The SAE's optimizer: train's Adam with SAELens's defaults (betas (0, 0.999), no weight decay),
// wrapped as the SaeOptimizer that interp::train_sae steps. Header-only: the interp library reads
// no training code; the programs that train an SAE (the command line, Python, tests) link train.
#pragma once

#include <memory>

#include "interp/sae_training.h"
#include "train/optimizer.h"

namespace gradlab::interp {

struct SaeAdam {
  explicit SaeAdam(Sae& sae)
      : adam(train::make_optimizer(
            {.name = "adam", .beta1 = 0.0, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0},
            sae.named_parameters())),
        optimizer{[this](double lr) { adam->step(lr); }, [this] { return adam->state(); }} {}
  SaeAdam(const SaeAdam&) = delete;
  SaeAdam& operator=(const SaeAdam&) = delete;

  std::unique_ptr<train::Optimizer> adam;
  SaeOptimizer optimizer;
};

}  // namespace gradlab::interp
