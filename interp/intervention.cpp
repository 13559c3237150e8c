// Interventions: the kinds, parsing --intervene specs, and reading their arrays and
// orthonormalising their subspaces (the hooks that apply them: intervention_hooks.cpp).
#include "interp/intervention.h"

#include <H5Cpp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "autograd/error.h"
#include "autograd/format.h"
#include "interp/files/sae_file.h"
#include "io/hdf5/errors.h"
#include "io/hdf5/file.h"
#include "io/hdf5/tensors.h"

namespace gradlab::interp {
namespace {

// Rows whose part orthogonal to the earlier rows is below this fraction of the longest row add
// no direction (they lie in the span already, up to rounding).
constexpr double kDependentRow = 1e-10;

[[noreturn]] void fail(const std::string& spec, const std::string& what) {
  throw ConfigError("--intervene " + quote(spec) + ": " + what);
}

// The dataset of file (a path inside it: "group/name"), as float64 values.
Tensor read_array(const std::string& spec, const std::string& file, const std::string& dataset) {
  if (!std::filesystem::is_regular_file(file)) fail(spec, "no such file " + quote(file));
  io::hdf5::quiet_hdf5();  // the one-line error replaces HDF5's stack on stderr
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
    Tensor values = io::hdf5::read_values(file, {stored}).at(0).second.to(DType::Float64);
    const std::vector<double> flat = values.to_vector();
    if (const auto bad =
            std::find_if(flat.begin(), flat.end(), [](double x) { return !std::isfinite(x); });
        bad != flat.end()) {
      fail(spec, "dataset " + quote(dataset) + " holds " + format_number(*bad) + " at index " +
                     std::to_string(bad - flat.begin()) + ": only finite values");
    }
    return values;
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

}  // namespace

const std::vector<InterventionKindRow>& intervention_kinds() {
  static const std::vector<InterventionKindRow> rows{
      {"zero", InterventionKind::zero, InterventionArgument::none,
       "the activation (or the head's slice) set to zero"},
      {"mean", InterventionKind::mean, InterventionArgument::none,
       "set to its mean over the held-out sequences, at each position"},
      {"resample", InterventionKind::resample, InterventionArgument::none,
       "set to what the next held-out sequence puts there: sequence b of a pass takes held-out "
       "sequence (b + 1) mod N's"},
      {"value", InterventionKind::value, InterventionArgument::array,
       "set to the array FILE.h5#DATASET ([T, ...] for every sequence, or [B, T, ...]); a "
       "parameter replaced by it"},
      {"project-out", InterventionKind::project_out, InterventionArgument::subspace,
       "x - P x: the subspace spanned by the rows of FILE.h5#DATASET removed"},
      {"keep", InterventionKind::keep, InterventionArgument::subspace,
       "P x: only that subspace kept"},
      {"sae", InterventionKind::sae, InterventionArgument::sae,
       "x_hat: the sparse autoencoder FILE.h5's reconstruction spliced in (gradlab sae train)"},
  };
  return rows;
}

Intervention parse_intervention(const std::string& spec) {
  Intervention out;
  out.spec = spec;
  // A path ends at its first NUL: the spec would name another file than it shows.
  if (spec.find('\0') != std::string::npos) fail(spec, "a NUL character");
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
  if (kind.argument == InterventionArgument::none) {
    if (colon != std::string::npos) fail(spec, std::string(kind.name) + " takes no argument");
    return out;
  }
  const std::string source = colon == std::string::npos ? "" : action.substr(colon + 1);
  if (kind.argument == InterventionArgument::sae) {
    if (source.empty()) fail(spec, "sae needs FILE.h5 (an SAE's file)");
    if (!std::filesystem::is_regular_file(source)) fail(spec, "no such file " + quote(source));
    try {
      out.sae = read_sae_file(source);
    } catch (const CheckpointError& e) {
      fail(spec, e.what());
    }
    return out;
  }
  const size_t hash = source.rfind('#');
  if (hash == std::string::npos || hash == 0 || hash + 1 == source.size()) {
    fail(spec, std::string(kind.name) + " needs FILE.h5#DATASET");
  }
  const std::string dataset = source.substr(hash + 1);
  const Tensor stored = read_array(spec, source.substr(0, hash), dataset);
  out.stored_shape = stored.shape();
  if (kind.argument == InterventionArgument::array) {
    out.array = stored;
    return out;
  }
  if (stored.rank() != 2) {
    fail(spec, "dataset " + quote(dataset) + " is " + to_string(stored.shape()) +
                   ", not a matrix [k, C]");
  }
  out.basis = orthonormal_rows(stored);
  return out;
}

}  // namespace gradlab::interp
