// Interventions on a forward pass, `--intervene SPEC`: a hook point's activation (or one head's
// slice of it) set to zero, to its held-out mean, to another held-out sequence's activation or to
// a stored array, or projected onto or off a subspace read from an HDF5 file, or replaced by a
// sparse autoencoder's reconstruction; or a parameter replaced by a stored array. Parsed from the
// command line's text (the Python binding parses the same text) and applied to a model for as long
// as an AppliedInterventions lives.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"
#include "interp/sae.h"
#include "nn/hooks.h"
#include "nn/sequence_model.h"

namespace gradlab::interp {

enum class InterventionKind { zero, mean, resample, value, project_out, keep, sae };

// What a kind reads after its ':': nothing, a matrix whose rows span a subspace, an array, or a
// sparse autoencoder's file (interp/files/sae_file.h).
enum class InterventionArgument { none, subspace, array, sae };

struct InterventionKindRow {
  const char* name;  // as in the spec: "project-out"
  InterventionKind id;
  InterventionArgument argument;  // subspace and array: FILE.h5#DATASET; sae: FILE.h5
  const char* description;
};
const std::vector<InterventionKindRow>& intervention_kinds();

// One parsed spec: POINT[:HEAD]=KIND[:FILE.h5#DATASET], POINT=sae:FILE.h5, or
// PARAM=value:FILE.h5#DATASET.
struct Intervention {
  std::string spec;   // as given, for messages
  std::string point;  // a hook point's name or glob, or a parameter's name (told apart on a model)
  int64_t head = -1;  // one head of a per-head point (hook_q/k/v/z, hook_pattern); -1: the whole
  InterventionKind kind = InterventionKind::zero;
  // project-out and keep: an orthonormal basis [r, C'] (float64) of the row space of the file's
  // matrix [k, C'], r <= k (rows that depend on earlier ones add nothing).
  Tensor basis;
  // value: the file's array as float64.
  Tensor array;
  Shape stored_shape;              // the file's shape, for messages
  std::shared_ptr<const Sae> sae;  // sae: the autoencoder read from the file
};

// Throws ConfigError "--intervene '<spec>': <what is wrong>" for a spec without '=', an unknown
// kind, a head that is not a number, a kind that reads a file without FILE#DATASET (or one that
// reads none with an argument), a file that is missing or not HDF5, a dataset that is missing,
// or a subspace that is not a matrix; for sae, a file that is not an SAE's (read_sae_file's
// reason).
Intervention parse_intervention(const std::string& spec);

// One hook per intervention on a hook point, in the order given (several on one point compose in
// that order), each replacing what its spec names, the point's activation x or one head's slice:
//   zero: 0. mean: the point's mean over the held-out sequences (axis B) at each position.
//   resample: in a forward pass of B sequences, sequence b takes the activation held-out sequence
//     (b + 1) mod N had (N held-out sequences; one sequence, as predict runs, takes held-out
//     sequence 1): what another input puts there, with nothing drawn at random. eval scores the
//     held-out set in chunks, so there sequence b of each chunk takes held-out sequence b + 1.
//   value: the stored array, [T, ...] (the point's shape without B, and without the head axis
//     for one head) for every sequence alike, or [B, T, ...] one per sequence.
//   project-out: x - P x; keep: P x, with P the orthogonal projector onto the basis' span, over
//     the point's last axis (of a head's slice alone with HEAD).
//   sae: the SAE's reconstruction x_hat of x (the whole point, which must be the one the SAE was
//     trained on, of a model with the parameters it was trained on).
// Means and resampled activations are read by one run of evaluate over heldout (of the model as
// the other interventions' parameters leave it), and like a value they may run over more
// positions than a pass: a pass over T positions takes their first T (of each position axis), so
// that a prompt shorter than the held-out sequences reads what they hold at its positions.
// Throws ConfigError for a point that matches none of the model's (naming the closest points and
// parameters), a head past the point's head axis or on a point without one, a subspace whose width
// differs from the point's last axis or a value of another shape (naming both shapes), an SAE
// on a head, another point or another model (naming what it was trained on); a hook
// throws ShapeError for a pass longer than a stored array or of another batch.
std::vector<nn::Hook> intervention_hooks(const nn::SequenceModel& model,
                                         const nn::SequenceBatch& heldout,
                                         const std::vector<Intervention>& interventions,
                                         const std::function<void()>& evaluate);

// PARAM=value:FILE.h5#DATASET replaces the parameter named as model.named_parameters() (and
// `gradlab inspect`) names it, in place, for as long as the override lives; the destructor writes
// the loaded values back, when an exception unwinds too, so the model is left as it was loaded.
class ParameterOverrides {
 public:
  // Throws ConfigError for a head on a parameter, a kind other than value, or an array whose
  // shape is not the parameter's (naming both).
  ParameterOverrides(const nn::SequenceModel& model, const std::vector<Intervention>& overrides);
  ~ParameterOverrides();
  ParameterOverrides(const ParameterOverrides&) = delete;
  ParameterOverrides& operator=(const ParameterOverrides&) = delete;

 private:
  std::vector<std::pair<Tensor, Tensor>> saved_;  // (parameter, its loaded values)
};

// Every intervention in force on model, on the calling thread, while it lives: the parameters
// replaced (ParameterOverrides), then the hooks of the others (intervention_hooks) in an
// nn::HookScope, which stays applied inside the instruments' own hooked runs and caches. A spec
// names a parameter when its name is one of model.named_parameters(), else hook points.
class AppliedInterventions {
 public:
  AppliedInterventions(const nn::SequenceModel& model, const nn::SequenceBatch& heldout,
                       const std::vector<Intervention>& interventions,
                       const std::function<void()>& evaluate);
  ~AppliedInterventions();

 private:
  std::unique_ptr<ParameterOverrides> parameters_;
  std::unique_ptr<nn::HookScope> hooks_;
};

}  // namespace gradlab::interp
