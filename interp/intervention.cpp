// Interventions: parsing --intervene specs, reading and orthonormalising their subspaces, and the
// hooks that apply them (zero and mean through ablate's knock_out).
#include "interp/intervention.h"

#include <H5Cpp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/matmul.h"
#include "autograd/ops.h"
#include "autograd/shape_ops.h"
#include "interp/ablation.h"
#include "interp/patching.h"
#include "io/hdf5/file.h"
#include "io/hdf5/tensors.h"

namespace gradlab::interp {
namespace {

// Rows whose part orthogonal to the earlier rows is below this fraction of the longest row add
// no direction (they lie in the span already, up to rounding).
constexpr double kDependentRow = 1e-10;

// knock_out's head mask runs along axis 2: hook_z, hook_q ([B, T, H, D]), hook_k, hook_v.
constexpr int64_t kKnockOutHeadAxis = 2;

[[noreturn]] void fail(const std::string& spec, const std::string& what) {
  throw ConfigError("--intervene " + quote(spec) + ": " + what);
}

// The matrix dataset of file (a path inside it: "group/name"), as float64 values.
Tensor read_matrix(const std::string& spec, const std::string& file, const std::string& dataset) {
  if (!std::filesystem::is_regular_file(file)) fail(spec, "no such file " + quote(file));
  try {
    io::hdf5::Source source{file, io::hdf5::open_hdf5(file), 0};
    source.size = source.file.getFileSize();
    H5::Group group = source.file.openGroup("/");
    std::string item;
    std::istringstream parts(dataset);
    std::vector<std::string> names;
    for (std::string name; std::getline(parts, name, '/');) {
      if (!name.empty()) names.push_back(name);
    }
    if (names.empty()) fail(spec, "no dataset after '#'");
    for (size_t i = 0; i + 1 < names.size(); ++i) {
      item += "/" + names[i];
      group = io::hdf5::open_group(file, item, group, names[i]);
    }
    item += "/" + names.back();
    const io::hdf5::StoredTensor stored =
        io::hdf5::open_tensor(source, dataset, item, group, names.back());
    if (stored.shape.size() != 2) {
      fail(spec, "dataset " + quote(dataset) + " is " + to_string(stored.shape) +
                     ", not a matrix [k, C]");
    }
    return io::hdf5::read_values(file, {stored}).at(0).second.to(DType::Float64);
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    fail(spec, e.what());
  } catch (const std::runtime_error& e) {  // CheckpointError: not HDF5, damaged, unreadable
    fail(spec, e.what());
  } catch (const H5::Exception& e) {
    fail(spec, "cannot read " + quote(file) + "#" + dataset + ": " + e.getDetailMsg());
  }
}

// An orthonormal basis of matrix's row space, by modified Gram-Schmidt (twice, so that the rows
// stay orthogonal to rounding) in float64: the Q of a QR of the transpose.
Tensor orthonormal_rows(const Tensor& matrix) {
  const int64_t rows = matrix.size(0), width = matrix.size(1);
  const std::vector<double> values = matrix.to_vector();
  double longest = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double norm = 0;
    for (int64_t c = 0; c < width; ++c) norm += values[r * width + c] * values[r * width + c];
    longest = std::max(longest, std::sqrt(norm));
  }
  std::vector<std::vector<double>> basis;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> v(values.begin() + r * width, values.begin() + (r + 1) * width);
    for (int pass = 0; pass < 2; ++pass) {
      for (const std::vector<double>& q : basis) {
        double dot = 0;
        for (int64_t c = 0; c < width; ++c) dot += q[c] * v[c];
        for (int64_t c = 0; c < width; ++c) v[c] -= dot * q[c];
      }
    }
    double norm = 0;
    for (const double x : v) norm += x * x;
    norm = std::sqrt(norm);
    if (norm <= kDependentRow * longest || norm == 0) continue;
    for (double& x : v) x /= norm;
    basis.push_back(std::move(v));
  }
  std::vector<double> flat;
  for (const std::vector<double>& q : basis) flat.insert(flat.end(), q.begin(), q.end());
  return Tensor::from_vector(flat, {static_cast<int64_t>(basis.size()), width}, DType::Float64);
}

const InterventionKindRow& kind_named(const std::string& spec, const std::string& name) {
  for (const InterventionKindRow& row : intervention_kinds()) {
    if (name == row.name) return row;
  }
  std::string names;
  for (const InterventionKindRow& row : intervention_kinds()) {
    names += (names.empty() ? "" : ", ") + std::string(row.name);
  }
  fail(spec, "unknown kind " + quote(name) + " (one of " + names + ")");
}

// The orthogonal projector onto the span of basis' rows: [C, C], symmetric.
Tensor projector_of(const Tensor& basis) {
  return matmul(transpose(basis, 0, 1), basis);
}

}  // namespace

const std::vector<InterventionKindRow>& intervention_kinds() {
  static const std::vector<InterventionKindRow> rows{
      {"zero", InterventionKind::zero, false, "the activation (or the head's slice) set to zero"},
      {"mean", InterventionKind::mean, false,
       "set to its mean over the held-out sequences, at each position"},
      {"project-out", InterventionKind::project_out, true,
       "x - P x: the subspace spanned by the rows of FILE.h5#DATASET removed"},
      {"keep", InterventionKind::keep, true, "P x: only that subspace kept"},
  };
  return rows;
}

Intervention parse_intervention(const std::string& spec) {
  Intervention out;
  out.spec = spec;
  const size_t equals = spec.find('=');
  if (equals == std::string::npos) fail(spec, "expected POINT[:HEAD]=KIND");
  out.point = spec.substr(0, equals);
  if (const size_t colon = out.point.rfind(':'); colon != std::string::npos) {
    const std::string head = out.point.substr(colon + 1);
    if (head.empty() || head.find_first_not_of("0123456789") != std::string::npos ||
        head.size() > 9) {
      fail(spec, "head " + quote(head) + " is not a number");
    }
    out.head = std::stoll(head);
    out.point.resize(colon);
  }
  if (out.point.empty()) fail(spec, "no hook point before '='");
  const std::string action = spec.substr(equals + 1);
  const size_t colon = action.find(':');
  const InterventionKindRow& kind = kind_named(spec, action.substr(0, colon));
  out.kind = kind.id;
  if (!kind.reads_subspace) {
    if (colon != std::string::npos) fail(spec, std::string(kind.name) + " takes no argument");
    return out;
  }
  const std::string source = colon == std::string::npos ? "" : action.substr(colon + 1);
  const size_t hash = source.rfind('#');
  if (hash == std::string::npos || hash == 0 || hash + 1 == source.size()) {
    fail(spec, std::string(kind.name) + " needs FILE.h5#DATASET");
  }
  const Tensor matrix = read_matrix(spec, source.substr(0, hash), source.substr(hash + 1));
  out.stored_shape = matrix.shape();
  out.basis = orthonormal_rows(matrix);
  return out;
}

std::vector<nn::Hook> intervention_hooks(const nn::SequenceModel& model,
                                         const nn::SequenceBatch& heldout,
                                         const std::vector<Intervention>& interventions,
                                         const std::function<void()>& evaluate) {
  const std::vector<nn::HookPointInfo> points = nn::hook_points(model, heldout);
  std::vector<std::vector<ModelPart>> parts_of;  // per intervention
  std::vector<ModelPart> averaged;
  for (const Intervention& iv : interventions) {
    std::vector<ModelPart> parts;
    const std::string caller = "--intervene " + quote(iv.spec);
    for (const std::string& name : nn::matching_points(points, iv.point, caller)) {
      const nn::HookPointInfo& info = *std::find_if(points.begin(), points.end(),
                                                    [&](const auto& p) { return p.name == name; });
      if (iv.head >= 0) {
        const int64_t axis = head_axis(info);
        if (axis < 0) fail(iv.spec, name + " " + info.letters + " has no head axis");
        if (iv.head >= info.shape[static_cast<size_t>(axis)]) {
          fail(iv.spec, "head " + std::to_string(iv.head) + " is past " + name + "'s " +
                            std::to_string(info.shape[static_cast<size_t>(axis)]) + " heads");
        }
      }
      if (iv.basis.defined() && iv.stored_shape.back() != info.shape.back()) {
        fail(iv.spec, "the subspace is " + to_string(iv.stored_shape) + " but " + name + " is " +
                          info.letters + " " + to_string(info.shape) +
                          ": the last axes must match");
      }
      parts.push_back({name, iv.head});
      if (iv.kind == InterventionKind::mean) averaged.push_back({name, -1});
    }
    parts_of.push_back(std::move(parts));
  }
  const std::map<std::string, Tensor> means =
      ablation_means(model, heldout, evaluate,
                     averaged.empty() ? AblationMode::zero : AblationMode::mean, averaged);

  std::vector<nn::Hook> hooks;
  for (size_t i = 0; i < interventions.size(); ++i) {
    const Intervention& iv = interventions[i];
    for (const ModelPart& part : parts_of[i]) {
      const int64_t axis =
          iv.head >= 0
              ? head_axis(*std::find_if(points.begin(), points.end(),
                                        [&](const auto& p) { return p.name == part.point; }))
              : -1;
      if (iv.kind == InterventionKind::zero || iv.kind == InterventionKind::mean) {
        const AblationMode mode =
            iv.kind == InterventionKind::zero ? AblationMode::zero : AblationMode::mean;
        if (axis < 0 || axis == kKnockOutHeadAxis) {
          for (nn::Hook& hook : knock_out({part}, mode, means)) hooks.push_back(std::move(hook));
          continue;
        }
        // A head on another axis (hook_pattern's H): the same product with a 0/1 mask.
        const Tensor mean = mode == AblationMode::mean ? means.at(part.point) : Tensor();
        const int64_t head = iv.head;
        hooks.push_back({part.point, [axis, head, mean](const Tensor& x, const std::string&) {
                           const Tensor kept = nn::zero_head(x, axis, head);
                           return mean.defined() ? kept + (mean - nn::zero_head(mean, axis, head))
                                                 : kept;
                         }});
        continue;
      }
      const bool keep = iv.kind == InterventionKind::keep;
      const Tensor projector = projector_of(iv.basis);
      const int64_t head = iv.head;
      hooks.push_back(
          {part.point, [keep, projector, axis, head](const Tensor& x, const std::string&) {
             const Tensor kept = matmul(x, projector.to(x.dtype()));  // P x over the last axis
             const Tensor changed = keep ? kept : x - kept;
             if (head < 0) return changed;
             return nn::zero_head(x, axis, head) + (changed - nn::zero_head(changed, axis, head));
           }});
    }
  }
  return hooks;
}

}  // namespace gradlab::interp
