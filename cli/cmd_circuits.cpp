// `gradlab circuits`: the weight-based circuits of a checkpoint's model (interp/circuits.h):
// per head the norms of W_OV and W_QK, the copying score and top singular values, then the
// highest Q-, K- and V-composition scores beside their random baseline; optionally an HDF5 file.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cli/checkpoint_args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "interp/circuits.h"
#include "interp/files/circuits_file.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;

constexpr int64_t kShownSingularValues = 3;

struct CircuitsArgs {
  CircuitsArgs() {
    checkpoint.options.add_options()(
        "layer", po::value(&layer),
        "show only this attention (its index in the table, in forward order); the file holds all")(
        "head", po::value(&head), "show only this head of each attention shown")(
        "top", po::value(&top)->default_value(top),
        "composition scores shown per kind (the highest)")(
        "baseline-draws",
        po::value(&circuits.baseline_draws)->default_value(circuits.baseline_draws),
        "random matrix pairs the composition baseline is averaged over")(
        "seed", po::value(&circuits.seed)->default_value(circuits.seed),
        "seed of the baseline's random matrices");
    add_output_options(
        checkpoint, {.help = "also write every number to this (new) HDF5 file", .required = false});
    add_checkpoint_options(checkpoint);
  }
  interp::CircuitOptions circuits;
  int64_t layer = -1, head = -1, top = 5;
  CheckpointArgs checkpoint{
      "gradlab circuits: each head's W_OV and W_QK, its copying score and the composition scores "
      "of every pair of heads, from the weights alone (docs/circuits.md)\nOptions"};
  const boost::program_options::options_description& options = checkpoint.options;
};

int parse_circuits(const Arguments& args, CircuitsArgs& a) {
  const CheckpointArgs& c = a.checkpoint;
  if (const int code = parse_with_output("circuits", args, a.checkpoint, "circuits"); code >= 0) {
    return code;
  }
  for (const auto& [flag, value] : {std::pair{"layer", a.layer}, std::pair{"head", a.head}}) {
    if (c.vm.count(flag) && value < 0) {
      return usage_error("circuits",
                         std::string("--") + flag + " " + std::to_string(value) + ": at least 0",
                         c.options);
    }
  }
  if (a.top < 0) {
    return usage_error("circuits", "--top " + std::to_string(a.top) + ": at least 0", c.options);
  }
  if (a.circuits.baseline_draws < 1) {
    return usage_error(
        "circuits",
        "--baseline-draws " + std::to_string(a.circuits.baseline_draws) + ": at least 1",
        c.options);
  }
  return -1;
}

bool shown(const CircuitsArgs& a, size_t layer, int64_t head) {
  return (a.layer < 0 || static_cast<int64_t>(layer) == a.layer) && (a.head < 0 || head == a.head);
}

void print_heads(const interp::CircuitReport& r, const CircuitsArgs& a) {
  std::printf("%-22s %4s %8s %8s %8s %9s %9s  %s\n", "attention", "head", "|W_OV|", "|W_QK|",
              "copying", "own top1", "own rank", "top singular values of W_OV");
  const int64_t shown_values = std::min(kShownSingularValues, r.head_dim);
  for (size_t l = 0; l < r.attentions.size(); ++l) {
    for (int64_t h = 0; h < r.heads; ++h) {
      if (!shown(a, l, h)) continue;
      const size_t i = l * static_cast<size_t>(r.heads) + static_cast<size_t>(h);
      std::printf("%-22s %4lld %8.3f %8.3f %8.3f %9.3f %9.2f ", r.attentions[l].c_str(),
                  static_cast<long long>(h), r.ov_norm[i], r.qk_norm[i], r.copying_score[i],
                  r.diagonal_top1[i], r.diagonal_mean_rank[i]);
      for (int64_t s = 0; s < shown_values; ++s) {
        std::printf(
            " %.3f",
            r.ov_singular_values[i * static_cast<size_t>(r.head_dim) + static_cast<size_t>(s)]);
      }
      std::printf("\n");
    }
  }
}

// "blocks.0.attn:1"
std::string head_name(const interp::CircuitReport& r, size_t index) {
  const size_t heads = static_cast<size_t>(r.heads);
  return r.attentions[index / heads] + ":" + std::to_string(index % heads);
}

void print_compositions(const interp::CircuitReport& r, const CircuitsArgs& a) {
  const size_t heads = static_cast<size_t>(r.heads), n = r.attentions.size() * heads;
  for (size_t k = 0; k < interp::kCompositions.size(); ++k) {
    const std::vector<double>& scores = r.composition[k];
    std::vector<size_t> pairs;
    for (size_t i = 0; i < scores.size(); ++i) {
      const size_t writer = i / n, reader = i % n;
      const bool selected = shown(a, writer / heads, static_cast<int64_t>(writer % heads)) ||
                            shown(a, reader / heads, static_cast<int64_t>(reader % heads));
      if (!std::isnan(scores[i]) && selected) pairs.push_back(i);
    }
    std::stable_sort(pairs.begin(), pairs.end(),
                     [&](size_t x, size_t y) { return scores[x] > scores[y]; });
    pairs.resize(std::min(pairs.size(), static_cast<size_t>(a.top)));
    const char kind =
        static_cast<char>(std::toupper(*interp::composition_name(interp::kCompositions[k])));
    std::printf("%c-composition (random baseline %.3f):%s\n", kind, r.baseline[k],
                pairs.empty() ? " no pair of heads composes this way" : "");
    for (const size_t i : pairs) {
      std::printf("  %-26s -> %-26s %.3f (%.1fx baseline)\n", head_name(r, i / n).c_str(),
                  head_name(r, i % n).c_str(), scores[i], scores[i] / r.baseline[k]);
    }
  }
}

int run_circuits(CircuitsArgs& a) {
  const train::TrainedModel trained = load_trained(a.checkpoint);
  const interp::CircuitReport report = interp::circuit_report(*trained.model, a.circuits);
  const int64_t layers = static_cast<int64_t>(report.attentions.size());
  if (a.layer >= layers) {
    return usage_error("circuits",
                       "--layer " + std::to_string(a.layer) + ": the model has " +
                           std::to_string(layers) + " attentions (0 to " +
                           std::to_string(layers - 1) + ")",
                       a.checkpoint.options);
  }
  if (a.head >= report.heads) {
    return usage_error("circuits",
                       "--head " + std::to_string(a.head) + ": the model has " +
                           std::to_string(report.heads) + " heads (0 to " +
                           std::to_string(report.heads - 1) + ")",
                       a.checkpoint.options);
  }
  std::printf("circuits of %s: %lld attentions x %lld heads of D = %lld, from the weights alone\n",
              a.checkpoint.checkpoint.c_str(), static_cast<long long>(layers),
              static_cast<long long>(report.heads), static_cast<long long>(report.head_dim));
  print_heads(report, a);
  print_compositions(report, a);
  if (!a.checkpoint.out.empty()) {
    interp::write_circuits_file(a.checkpoint.out, report, a.circuits);
    std::printf("wrote the circuits of %lld attentions to %s\n", static_cast<long long>(layers),
                a.checkpoint.out.c_str());
  }
  return kExitOk;
}

const CommandRow circuits_row{"circuits",
                              "each head's OV and QK circuits and the heads' composition scores",
                              {"--checkpoint"},
                              parse_circuits,
                              run_circuits};

}  // namespace

}  // namespace gradlab::cli
