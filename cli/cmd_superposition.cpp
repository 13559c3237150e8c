// `gradlab superposition`: the geometry of a trained toy model of superposition (task tms): per
// instance its feature density and each feature's norm, dimensionality and direction
// (data::superposition), as a table and optionally a CSV for scripts/plot_superposition.py.
#include <cstdio>
#include <optional>
#include <sstream>

#include "autograd/error.h"
#include "cli/checkpoint_args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "data/tms_task.h"
#include "io/atomic_file.h"

namespace gradlab::cli {
namespace {

struct SuperpositionArgs : CheckpointArgs {
  SuperpositionArgs()
      : CheckpointArgs(
            "gradlab superposition: each instance's density and the norm, dimensionality and "
            "direction of each feature of a toy model of superposition (task tms)\nOptions") {
    add_output_options(
        *this, {.help = "also write the table as CSV to this (new) file", .required = false});
    add_checkpoint_options(*this);
  }
};

int parse_superposition(const Arguments& args, SuperpositionArgs& a) {
  return parse_with_output("superposition", args, a, "the superposition table");
}

// A row per instance and feature; with two dimensions, the direction in degrees too. The
// columns w0, w1, ... are the feature's W column, the point a picture draws.
std::string csv(const data::Superposition& s) {
  const nn::FeatureGeometry& g = s.geometry;
  const std::vector<double> w = s.weight.to_vector();  // [I, m, n]
  std::ostringstream out;
  out.precision(9);
  out << "instance,density,feature,norm,dimensionality" << (g.angles.empty() ? "" : ",angle");
  for (int64_t d = 0; d < g.dims; ++d) out << ",w" << d;
  out << '\n';
  for (int64_t j = 0; j < g.instances; ++j) {
    for (int64_t i = 0; i < g.features; ++i) {
      const int64_t at = j * g.features + i;
      out << j << ',' << s.densities[j] << ',' << i << ',' << g.norms[at] << ','
          << g.dimensionality[at];
      if (!g.angles.empty()) out << ',' << g.angles[at];
      for (int64_t d = 0; d < g.dims; ++d) out << ',' << w[(j * g.dims + d) * g.features + i];
      out << '\n';
    }
  }
  return out.str();
}

// One row of an instance's block: label, then a value per feature.
void print_row(const char* label, const std::vector<double>& values, int64_t begin, int64_t count,
               const char* format) {
  std::printf("  %-16s", label);
  for (int64_t i = begin; i < begin + count; ++i) std::printf(format, values[i]);
  std::printf("\n");
}

void print_table(const data::Superposition& s) {
  const nn::FeatureGeometry& g = s.geometry;
  for (int64_t j = 0; j < g.instances; ++j) {
    std::printf("instance %lld, density %.4f\n  %-16s", static_cast<long long>(j), s.densities[j],
                "feature");
    for (int64_t i = 0; i < g.features; ++i) std::printf("  %7lld", static_cast<long long>(i));
    std::printf("\n");
    const int64_t begin = j * g.features;
    print_row("norm", g.norms, begin, g.features, "  %7.3f");
    print_row("dimensionality", g.dimensionality, begin, g.features, "  %7.3f");
    if (!g.angles.empty()) print_row("angle (degrees)", g.angles, begin, g.features, "  %7.1f");
  }
}

int run_superposition(SuperpositionArgs& a) {
  const train::TrainedModel trained = load_trained(a);
  std::optional<data::Superposition> s;
  try {
    s = data::superposition(*trained.model, *trained.task);
  } catch (const ConfigError& e) {
    return usage_error("superposition", a.checkpoint + " is " + e.what(), a.options);
  }
  const nn::FeatureGeometry& g = s->geometry;
  std::printf(
      "superposition of %s (step %lld): %lld instances, %lld features in %lld dimensions\n"
      "(norm ||W_i||; dimensionality D_i = ||W_i||^2 / sum_j (W_i_hat . W_j)^2: 1 for a feature "
      "with a dimension of its own, 1/2 in an antipodal pair, 2/5 on a pentagon, 0 when not "
      "represented)\n\n",
      a.checkpoint.c_str(), static_cast<long long>(trained.step),
      static_cast<long long>(g.instances), static_cast<long long>(g.features),
      static_cast<long long>(g.dims));
  print_table(*s);
  if (!a.out.empty()) {
    io::replace_file_text(a.out, csv(*s));
    std::printf("wrote the table to %s\n", a.out.c_str());
  }
  return kExitOk;
}

const CommandRow superposition_row{
    "superposition",
    "each feature's norm, dimensionality and direction in a toy model of superposition",
    {"--checkpoint"},
    parse_superposition,
    run_superposition};

}  // namespace

}  // namespace gradlab::cli
