// Interventions on a forward pass, `--intervene SPEC`: a hook point's activation (or one head's
// slice of it) set to zero or to its held-out mean, or projected onto or off a subspace read from
// an HDF5 file. Parsed from the command line's text and turned into nn::Hooks that the caller
// applies (nn::HookScope, run_with_hooks), so that any command can run a model intervened on.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "nn/hooks.h"
#include "nn/sequence_model.h"

namespace gradlab::interp {

enum class InterventionKind { zero, mean, project_out, keep };

struct InterventionKindRow {
  const char* name;  // as in the spec: "project-out"
  InterventionKind id;
  bool reads_subspace;  // takes :FILE.h5#DATASET
  const char* description;
};
const std::vector<InterventionKindRow>& intervention_kinds();

// One parsed spec: POINT[:HEAD]=zero | mean | project-out:FILE.h5#DATASET | keep:FILE.h5#DATASET.
struct Intervention {
  std::string spec;   // as given, for messages
  std::string point;  // a hook point's name or a glob
  int64_t head = -1;  // one head of a per-head point (hook_q/k/v/z, hook_pattern); -1: the whole
  InterventionKind kind = InterventionKind::zero;
  // project-out and keep: an orthonormal basis [r, C'] (float64) of the row space of the file's
  // matrix [k, C'], r <= k (rows that depend on earlier ones add nothing).
  Tensor basis;
  Shape stored_shape;  // the file's [k, C'], for messages
};

// Throws ConfigError "--intervene '<spec>': <what is wrong>" for a spec without '=', an unknown
// kind, a head that is not a number, a subspace kind without FILE#DATASET, a file that is missing
// or not HDF5, a dataset that is missing or not a matrix.
Intervention parse_intervention(const std::string& spec);

// One hook per intervention, in the order given (several on one point compose in that order).
// zero and mean are ablate's knock_out (interp/ablation.h): a whole point, or a head's slice at
// its head axis; mean is the point's mean over the held-out sequences (axis B) at each position,
// of the intact model, read by one run of evaluate (run only when some intervention is a mean).
// project-out: x - P x; keep: P x, with P the orthogonal projector onto the basis' span, over the
// point's last axis (of a head's slice alone with HEAD). Throws ConfigError for a point that
// matches none of the model's (naming the closest), a head past the point's head axis or on a
// point without one, and a subspace whose width differs from the point's last axis (both shapes).
std::vector<nn::Hook> intervention_hooks(const nn::SequenceModel& model,
                                         const nn::SequenceBatch& heldout,
                                         const std::vector<Intervention>& interventions,
                                         const std::function<void()>& evaluate);

}  // namespace gradlab::interp
