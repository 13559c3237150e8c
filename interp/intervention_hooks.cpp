// Interventions applied: the hooks of those on hook points (zero through ablate's knock_out, the
// held-out means and resampled activations read by one run of the caller's evaluation), the
// parameters replaced and restored, and the scope that holds both.
#include "interp/intervention.h"

#include <algorithm>
#include <map>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/matmul.h"
#include "autograd/ops.h"
#include "autograd/shape_ops.h"
#include "interp/ablation.h"
#include "interp/patching.h"

namespace gradlab::interp {
namespace {

// knock_out's head mask runs along axis 2: hook_z, hook_q ([B, T, H, D]), hook_k, hook_v.
constexpr int64_t kKnockOutHeadAxis = 2;

[[noreturn]] void refuse(const std::string& spec, const std::string& what) {
  throw ConfigError("--intervene " + quote(spec) + ": " + what);
}

const nn::HookPointInfo& point_named(const std::vector<nn::HookPointInfo>& points,
                                     const std::string& name) {
  return *std::find_if(points.begin(), points.end(), [&](const auto& p) { return p.name == name; });
}

// Which axes of a point run over positions (T, Tq, Tk, S), from its letters "[B, T, C]".
std::vector<bool> position_axes(const nn::HookPointInfo& info) {
  std::vector<bool> positions;
  std::string letters = info.letters.substr(1, info.letters.size() - 2);
  for (size_t start = 0; start <= letters.size();) {
    const size_t end = std::min(letters.find(", ", start), letters.size());
    const char first = letters[start];
    positions.push_back(first == 'T' || first == 'S');
    start = end + 2;
  }
  return positions;
}

// The point's shape with `axis` dropped (none for -1), and its letters likewise.
std::pair<Shape, std::string> without_axis(const nn::HookPointInfo& info, int64_t axis) {
  Shape shape = info.shape;
  std::string letters = info.letters.substr(1, info.letters.size() - 2);
  std::vector<std::string> names;
  for (size_t start = 0; start <= letters.size();) {
    const size_t end = std::min(letters.find(", ", start), letters.size());
    names.push_back(letters.substr(start, end - start));
    start = end + 2;
  }
  if (axis >= 0) {
    shape.erase(shape.begin() + axis);
    names.erase(names.begin() + axis);
  }
  std::string joined;
  for (const std::string& name : names) joined += (joined.empty() ? "" : ", ") + name;
  return {shape, "[" + joined + "]"};
}

// stored [N, ...] (of the point's rank) cut to its first positions along each position axis so
// that every axis after B has shape's length: ShapeError naming both (stored as `shown`, the
// file's shape for a value) when a pass is longer.
Tensor first_positions(const Tensor& stored, const Shape& shape, const std::vector<bool>& positions,
                       const std::string& what, const Shape& shown) {
  Tensor cut = stored;
  for (size_t axis = 1; axis < shape.size(); ++axis) {
    if (!positions[axis] || cut.size(static_cast<int64_t>(axis)) == shape[axis]) continue;
    if (cut.size(static_cast<int64_t>(axis)) < shape[axis]) {
      throw ShapeError(what + ": the stored " + to_string(shown) +
                       " holds fewer positions than the activation " + to_string(shape));
    }
    cut = narrow(cut, static_cast<int64_t>(axis), 0, shape[axis]);
  }
  return cut;
}

// x with its whole value (head -1) or the slice `head` of axis `axis` taken from replacement.
Tensor replaced(const Tensor& x, const Tensor& replacement, int64_t axis, int64_t head) {
  if (head < 0) return replacement;
  return nn::zero_head(x, axis, head) + (replacement - nn::zero_head(replacement, axis, head));
}

// The activations of the points named over the held-out set, [N, ...] each: one run of evaluate.
std::map<std::string, Tensor> heldout_activations(const nn::SequenceModel& model,
                                                  const nn::SequenceBatch& heldout,
                                                  const std::function<void()>& evaluate,
                                                  const std::vector<std::string>& names) {
  std::map<std::string, std::vector<Tensor>> passes;
  if (names.empty()) return {};
  const nn::HookFilter read(
      [names](const std::string& name) {
        return std::find(names.begin(), names.end(), name) != names.end();
      },
      "the resampled points");
  {
    nn::HookScope reading(model, heldout, {{read, [&](const Tensor& x, const std::string& name) {
                                              passes[name].push_back(x.detach());
                                              return Tensor();
                                            }}});
    evaluate();
  }
  std::map<std::string, Tensor> out;
  for (const auto& [name, tensors] : passes) out.emplace(name, concat(tensors, 0));
  return out;
}

// value's array as a tensor of the point's rank: B 1 for one array for every sequence, and the
// head axis 1 for one head's slice. ConfigError naming both shapes when it fits neither form (a
// position axis may be longer: a pass reads its first positions).
Tensor value_of_point_rank(const Intervention& iv, const nn::HookPointInfo& info, int64_t axis) {
  const int64_t slice_axis = iv.head >= 0 ? axis : -1;
  const auto [slice, letters] = without_axis(info, slice_axis);
  Shape stored = iv.stored_shape;
  if (stored.size() + 1 == slice.size()) stored.insert(stored.begin(), 1);
  if (slice_axis >= 0 && stored.size() == slice.size()) stored.insert(stored.begin() + axis, 1);
  const std::vector<bool> positions = position_axes(info);
  bool fits = stored.size() == info.shape.size();
  for (size_t a = 1; fits && a < stored.size(); ++a) {
    fits = static_cast<int64_t>(a) == slice_axis ? stored[a] == 1
           : positions[a]                        ? stored[a] >= 1
                                                 : stored[a] == info.shape[a];
  }
  if (!fits) {
    const Shape per_sequence(slice.begin() + 1, slice.end());
    refuse(iv.spec, "the stored array " + to_string(iv.stored_shape) + " does not fit " +
                        info.name + (iv.head >= 0 ? " head " + std::to_string(iv.head) : "") + " " +
                        letters + " " + to_string(slice) + ": give " + to_string(per_sequence) +
                        " for every sequence or [B, ...] one per sequence");
  }
  return reshape(iv.array, stored);
}

// The hook that sets a point (or a head's slice) to `source`'s rows cut to the pass's positions:
// one row for every sequence (rows 1), one per sequence (rows B), or (resample) row (b + 1) mod N
// for sequence b.
nn::Hook replacing_hook(const Intervention& iv, const std::string& point, int64_t axis,
                        std::vector<bool> positions, Tensor source) {
  const bool resample = iv.kind == InterventionKind::resample;
  const int64_t head = iv.head;
  const std::string what = "--intervene " + quote(iv.spec) + " at " + point;
  const Shape shown = iv.kind == InterventionKind::value ? iv.stored_shape : source.shape();
  return {point, [=](const Tensor& x, const std::string&) {
            const Tensor cut =
                first_positions(source, x.shape(), positions, what, shown).to(x.dtype());
            const int64_t rows = x.size(0), stored = cut.size(0);
            Tensor batch = cut;
            if (resample) {
              std::vector<Tensor> donors;
              for (int64_t b = 0; b < rows; ++b)
                donors.push_back(narrow(cut, 0, (b + 1) % stored, 1));
              batch = concat(donors, 0);
            } else if (stored != 1 && stored != rows) {
              throw ShapeError(what + ": the stored " + to_string(shown) + " holds " +
                               std::to_string(stored) + " sequences, the pass " +
                               to_string(x.shape()) + " " + std::to_string(rows));
            }
            return replaced(x, broadcast_to(batch, x.shape()), axis, head);
          }};
}

nn::Hook projecting_hook(const Intervention& iv, const std::string& point, int64_t axis) {
  const bool keep = iv.kind == InterventionKind::keep;
  const Tensor projector = matmul(transpose(iv.basis, 0, 1), iv.basis);  // [C, C], symmetric
  const int64_t head = iv.head;
  return {point, [keep, projector, axis, head](const Tensor& x, const std::string&) {
            const Tensor kept = matmul(x, projector.to(x.dtype()));  // P x over the last axis
            return replaced(x, keep ? kept : x - kept, axis, head);
          }};
}

// A zero: ablate's knock_out where its head axis is the point's, else the same by a 0/1 mask.
void add_zero_hooks(const Intervention& iv, const std::string& point, int64_t axis,
                    std::vector<nn::Hook>& hooks) {
  if (axis < 0 || axis == kKnockOutHeadAxis) {
    for (nn::Hook& hook : knock_out({{point, iv.head}}, AblationMode::zero, {})) {
      hooks.push_back(std::move(hook));
    }
    return;
  }
  const int64_t head = iv.head;
  hooks.push_back({point, [axis, head](const Tensor& x, const std::string&) {
                     return nn::zero_head(x, axis, head);
                   }});
}

// The hook points a spec names; the error for a name that is neither a point nor a parameter
// names the closest of both.
std::vector<std::string> points_named(const nn::SequenceModel& model,
                                      const std::vector<nn::HookPointInfo>& points,
                                      const Intervention& iv) {
  const std::string caller = "--intervene " + quote(iv.spec);
  try {
    return nn::matching_points(points, iv.point, caller);
  } catch (const ConfigError&) {
    std::vector<nn::HookPointInfo> both = points;
    for (const auto& [name, _] : model.named_parameters()) both.push_back({name, "", {}});
    try {
      nn::matching_points(both, iv.point, caller);
    } catch (const ConfigError& e) {
      const std::string message = e.what();
      const std::string closest = "closest: ";
      refuse(iv.spec, quote(iv.point) + " is neither a hook point nor a parameter of this model; " +
                          message.substr(message.rfind(closest)));
    }
    throw;
  }
}

// An SAE splices in only where it was trained: its own point of the model it was trained on.
void check_sae_point(const nn::SequenceModel& model, const Intervention& iv,
                     const nn::HookPointInfo& info) {
  const SaeConfig& c = iv.sae->config();
  if (iv.head >= 0) refuse(iv.spec, "an SAE replaces the whole point, not one head");
  if (info.name != c.hook) {
    refuse(iv.spec, "the SAE was trained on " + c.hook + ", not " + info.name);
  }
  if (info.shape.size() != 3 || info.shape.back() != c.d_in) {
    refuse(iv.spec, info.name + " is " + info.letters + " " + to_string(info.shape) +
                        " but the SAE reads [B, T, " + std::to_string(c.d_in) + "]");
  }
  if (model_fingerprint(model) != c.model_fingerprint) {
    refuse(iv.spec, "the SAE was trained on another model (" + quote(c.checkpoint) +
                        "): its parameters differ from this model's");
  }
}

bool names_parameter(const nn::SequenceModel& model, const std::string& name) {
  for (const auto& [parameter, _] : model.named_parameters()) {
    if (parameter == name) return true;
  }
  return false;
}

}  // namespace

std::vector<nn::Hook> intervention_hooks(const nn::SequenceModel& model,
                                         const nn::SequenceBatch& heldout,
                                         const std::vector<Intervention>& interventions,
                                         const std::function<void()>& evaluate) {
  const std::vector<nn::HookPointInfo> points = nn::hook_points(model, heldout);
  std::vector<std::vector<std::string>> points_of;  // per intervention
  std::vector<ModelPart> averaged;
  std::vector<std::string> resampled;
  for (const Intervention& iv : interventions) {
    const std::vector<std::string> names = points_named(model, points, iv);
    for (const std::string& name : names) {
      const nn::HookPointInfo& info = point_named(points, name);
      const int64_t axis = head_axis(info);
      if (iv.head >= 0) {
        if (axis < 0) refuse(iv.spec, name + " " + info.letters + " has no head axis");
        if (iv.head >= info.shape[static_cast<size_t>(axis)]) {
          refuse(iv.spec, "head " + std::to_string(iv.head) + " is past " + name + "'s " +
                              std::to_string(info.shape[static_cast<size_t>(axis)]) + " heads");
        }
      }
      if (iv.basis.defined() && iv.stored_shape.back() != info.shape.back()) {
        refuse(iv.spec, "the subspace is " + to_string(iv.stored_shape) + " but " + name + " is " +
                            info.letters + " " + to_string(info.shape) +
                            ": the last axes must match");
      }
      if (iv.kind == InterventionKind::value) value_of_point_rank(iv, info, axis);
      if (iv.kind == InterventionKind::sae) check_sae_point(model, iv, info);
      if (iv.kind == InterventionKind::mean) averaged.push_back({name, -1});
      if (iv.kind == InterventionKind::resample) resampled.push_back(name);
    }
    points_of.push_back(names);
  }
  const std::map<std::string, Tensor> means =
      ablation_means(model, heldout, evaluate,
                     averaged.empty() ? AblationMode::zero : AblationMode::mean, averaged);
  const std::map<std::string, Tensor> donors =
      heldout_activations(model, heldout, evaluate, resampled);

  std::vector<nn::Hook> hooks;
  for (size_t i = 0; i < interventions.size(); ++i) {
    const Intervention& iv = interventions[i];
    for (const std::string& point : points_of[i]) {
      const nn::HookPointInfo& info = point_named(points, point);
      const int64_t axis = iv.head >= 0 ? head_axis(info) : -1;
      switch (iv.kind) {
        case InterventionKind::zero:
          add_zero_hooks(iv, point, axis, hooks);
          break;
        case InterventionKind::mean:
          hooks.push_back(replacing_hook(iv, point, axis, position_axes(info), means.at(point)));
          break;
        case InterventionKind::resample:
          hooks.push_back(replacing_hook(iv, point, axis, position_axes(info), donors.at(point)));
          break;
        case InterventionKind::value:
          hooks.push_back(replacing_hook(iv, point, axis, position_axes(info),
                                         value_of_point_rank(iv, info, head_axis(info))));
          break;
        case InterventionKind::project_out:
        case InterventionKind::keep:
          hooks.push_back(projecting_hook(iv, point, axis));
          break;
        case InterventionKind::sae:
          hooks.push_back({point, [sae = iv.sae](const Tensor& x, const std::string&) {
                             return sae->reconstruct(x);
                           }});
          break;
      }
    }
  }
  return hooks;
}

ParameterOverrides::ParameterOverrides(const nn::SequenceModel& model,
                                       const std::vector<Intervention>& overrides) {
  for (const Intervention& iv : overrides) {
    if (iv.head >= 0) refuse(iv.spec, iv.point + " is a parameter: it has no heads");
    if (iv.kind != InterventionKind::value) {
      refuse(iv.spec, iv.point + " is a parameter: only value:FILE.h5#DATASET replaces it");
    }
    Tensor parameter = model.parameter(iv.point);
    if (iv.stored_shape != parameter.shape()) {
      refuse(iv.spec, "the stored array " + to_string(iv.stored_shape) + " is not the shape of " +
                          iv.point + " " + to_string(parameter.shape()));
    }
  }
  // Checked first, so that nothing is written unless everything fits.
  for (const Intervention& iv : overrides) {
    Tensor parameter = model.parameter(iv.point);
    saved_.emplace_back(parameter, parameter.clone());
    parameter.copy_from(iv.array.to(parameter.dtype()));
  }
}

ParameterOverrides::~ParameterOverrides() {
  // Last replaced first: a parameter named twice gets its loaded values back.
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) it->first.copy_from(it->second);
}

AppliedInterventions::AppliedInterventions(const nn::SequenceModel& model,
                                           const nn::SequenceBatch& heldout,
                                           const std::vector<Intervention>& interventions,
                                           const std::function<void()>& evaluate) {
  std::vector<Intervention> parameters, points;
  for (const Intervention& iv : interventions) {
    (names_parameter(model, iv.point) ? parameters : points).push_back(iv);
  }
  parameters_ = std::make_unique<ParameterOverrides>(model, parameters);
  if (!points.empty()) {
    hooks_ = std::make_unique<nn::HookScope>(model, heldout,
                                             intervention_hooks(model, heldout, points, evaluate));
  }
}

AppliedInterventions::~AppliedInterventions() = default;

}  // namespace gradlab::interp
