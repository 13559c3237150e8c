// `gradlab fourier`: the Fourier analysis of a modular-addition checkpoint (interp/fourier.h):
// its key frequencies, its neurons' frequency clusters and its restricted and excluded losses,
// optionally written to HDF5 or a CSV table; or, over a run directory's step checkpoints, the
// curve of the losses.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/threads.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "interp/files/fourier_file.h"
#include "interp/fourier.h"
#include "train/checkpoint.h"
#include "train/io/run_directory.h"
#include "train/modular_pairs.h"
#include "train/trained_model.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

constexpr size_t kShownFrequencies = 12;  // key frequencies printed; the files hold them all

struct FourierArgs {
  FourierArgs() {
    add_help_option(options);
    options.add_options()("checkpoint", po::value(&checkpoint),
                          "a modular-addition checkpoint (.h5) to analyse")(
        "run", po::value(&run),
        "instead of --checkpoint: a run directory, every step checkpoint of which is analysed "
        "into the curve of the losses, with the newest checkpoint's key frequencies (as Nanda's)")(
        "out", po::value(&out),
        "with --checkpoint: also write the arrays to this (new) .h5 file, or the per-frequency "
        "table to a .csv; with --run: the curve's CSV (default <run>/fourier.csv)")(
        "overwrite", po::bool_switch(&overwrite),
        "replace --out if it exists (never a checkpoint)")(
        "share", po::value(&fourier.share)->default_value(fourier.share, "0.9"),
        "the key frequencies: the fewest that hold this share of the embedding's non-constant "
        "squared norm, in (0, 1]")(
        "neuron-threshold",
        po::value(&fourier.neuron_threshold)->default_value(fourier.neuron_threshold, "0.85"),
        "the share of a neuron's variance one frequency must explain to cluster it, in (0, 1]");
    add_threads_option(options, threads);
  }
  po::options_description options{
      "gradlab fourier: the key frequencies, the neurons' frequency clusters and the restricted "
      "and excluded losses of a modular-addition model (docs/experiments.md, \"Grokking's "
      "Fourier circuit\")\nOptions"};
  po::variables_map vm;
  std::string checkpoint, run, out;
  bool overwrite = false;
  int64_t threads = 1;
  interp::FourierOptions fourier;
};

bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// Why out may not be written, or "".
std::string refuse_output(const FourierArgs& a) {
  std::error_code error;
  if (!fs::exists(a.out, error)) return "";
  const std::string out = "--out " + a.out;
  if (!fs::is_regular_file(a.out, error)) return out + " exists and is not a regular file";
  try {
    train::read_checkpoint_config(a.out);
    return out + " is a checkpoint; write the analysis to a file of its own";
  } catch (const CheckpointError&) {
    // not a checkpoint: an earlier analysis, say
  }
  return a.overwrite ? "" : out + " already exists; pass --overwrite to replace it";
}

int parse_fourier(const Arguments& args, FourierArgs& a) {
  if (const int code = parse_or_usage("fourier", args, a.options, a.vm); code >= 0) return code;
  if (const int code = check_threads("fourier", a.threads, a.options); code >= 0) return code;
  if (a.checkpoint.empty() == a.run.empty()) {
    return usage_error("fourier", "give exactly one of --checkpoint and --run", a.options);
  }
  for (const auto& [flag, value] : {std::pair{"--share", a.fourier.share},
                                    std::pair{"--neuron-threshold", a.fourier.neuron_threshold}}) {
    if (!(value > 0 && value <= 1)) {
      return usage_error(
          "fourier", std::string(flag) + " " + format_number(value) + ": not in (0, 1]", a.options);
    }
  }
  if (!a.run.empty()) {
    std::error_code error;
    if (!fs::is_directory(a.run, error)) {
      return usage_error("fourier", "--run " + a.run + ": not a directory", a.options);
    }
    if (a.out.empty()) a.out = (fs::path(a.run) / "fourier.csv").string();
    if (!ends_with(a.out, ".csv")) {
      return usage_error("fourier", "--out " + a.out + ": with --run, a .csv file", a.options);
    }
  } else {
    require_checkpoint_file(a.checkpoint);
    if (a.out.empty() && a.overwrite) {
      return usage_error("fourier", "--overwrite replaces an --out; none is given", a.options);
    }
    if (!a.out.empty() && !ends_with(a.out, ".h5") && !ends_with(a.out, ".csv")) {
      return usage_error("fourier", "--out " + a.out + ": a .h5 or a .csv file", a.options);
    }
  }
  if (const std::string refusal = a.out.empty() ? "" : refuse_output(a); !refusal.empty()) {
    return usage_error("fourier", refusal, a.options);
  }
  return -1;
}

// The checkpoint's analysis; ConfigError (naming the file) for one that is not modular addition.
interp::FourierAnalysis analyse(const std::string& path, const interp::FourierOptions& options,
                                int64_t& step) {
  train::TrainedModel trained = train::load_trained_model(path);
  const train::ModularPairBatches pairs = train::modular_pair_batches(trained);
  step = trained.step;
  nn::EvalScope eval(*trained.model);
  return interp::analyze_fourier(*trained.model, {pairs.modulus, pairs.train, pairs.heldout},
                                 options);
}

void print_analysis(const interp::FourierAnalysis& f, const interp::FourierOptions& options,
                    const std::string& path, int64_t step) {
  const interp::NeuronClusters& n = f.neurons;
  std::printf("%s (step %lld): modulus %lld, %zu neurons\n", path.c_str(),
              static_cast<long long>(step), static_cast<long long>(f.modulus), n.cluster.size());
  std::printf("key frequencies (%.0f%% of the embedding's non-constant squared norm):\n",
              100 * options.share);
  std::printf("%9s  %7s  %7s\n", "frequency", "share", "neurons");
  const size_t shown = std::min(f.key.frequencies.size(), kShownFrequencies);
  for (size_t i = 0; i < shown; ++i) {
    const int64_t k = f.key.frequencies[i];
    std::printf("%9lld  %7.4f  %7lld\n", static_cast<long long>(k), f.key.shares[i],
                static_cast<long long>(n.counts[static_cast<size_t>(k)]));
  }
  if (shown < f.key.frequencies.size()) {
    std::printf("(%zu more: the embedding is not yet sparse in the Fourier basis)\n",
                f.key.frequencies.size() - shown);
  }
  std::printf("neuron clusters (a frequency's terms explain >= %.2f of the variance):",
              options.neuron_threshold);
  for (size_t k = 1; k < n.counts.size(); ++k) {
    if (n.counts[k] > 0) std::printf(" %zu:%lld", k, static_cast<long long>(n.counts[k]));
  }
  std::printf("\nclustered: %zu of %zu neurons (%.1f%%)\n", n.cluster.size() - n.counts[0],
              n.cluster.size(), 100 * n.clustered_fraction);
  std::printf(
      "loss over the %lld answers (nats): train %.6f  test %.6f  restricted %.6f  excluded "
      "%.6f\n",
      static_cast<long long>(f.modulus), f.losses.train, f.losses.test, f.losses.restricted,
      f.losses.excluded);
}

int run_checkpoint(const FourierArgs& a) {
  int64_t step = 0;
  interp::FourierAnalysis analysis;
  try {
    analysis = analyse(a.checkpoint, a.fourier, step);
  } catch (const ConfigError& e) {
    return usage_error("fourier", e.what(), a.options);
  }
  print_analysis(analysis, a.fourier, a.checkpoint, step);
  if (ends_with(a.out, ".h5")) {
    interp::write_fourier_file(a.out, analysis, a.fourier, step);
    std::printf("wrote the arrays to %s\n", a.out.c_str());
  } else if (!a.out.empty()) {
    interp::write_fourier_table(a.out, analysis);
    std::printf("wrote the per-frequency table to %s\n", a.out.c_str());
  }
  return kExitOk;
}

int run_curve(const FourierArgs& a) {
  const std::vector<std::string> paths = train::step_checkpoints(a.run);
  if (paths.empty()) {
    return usage_error("fourier", "--run " + a.run + ": no step-*.h5 checkpoint in it", a.options);
  }
  // Nanda's curve: every checkpoint's losses with the newest one's key frequencies.
  interp::FourierOptions options = a.fourier;
  int64_t newest = 0;
  try {
    options.key_frequencies = analyse(paths.back(), a.fourier, newest).key.frequencies;
  } catch (const ConfigError& e) {
    return usage_error("fourier", e.what(), a.options);
  }
  std::vector<interp::FourierCurvePoint> points;
  for (const std::string& path : paths) {
    interp::FourierCurvePoint point;
    try {
      const interp::FourierAnalysis f = analyse(path, options, point.step);
      point.losses = f.losses;
      point.key_frequencies = f.key.frequencies;
    } catch (const ConfigError& e) {
      return usage_error("fourier", e.what(), a.options);
    }
    if (points.empty()) {
      std::printf("key frequencies of step %lld:", static_cast<long long>(newest));
      for (const int64_t k : options.key_frequencies)
        std::printf(" %lld", static_cast<long long>(k));
      std::printf("\n%8s  %10s  %10s  %10s  %10s\n", "step", "train", "test", "restricted",
                  "excluded");
    }
    std::printf("%8lld  %10.6f  %10.6f  %10.6f  %10.6f\n", static_cast<long long>(point.step),
                point.losses.train, point.losses.test, point.losses.restricted,
                point.losses.excluded);
    std::fflush(stdout);
    points.push_back(std::move(point));
  }
  interp::write_fourier_curve(a.out, points);
  std::printf("wrote the curve of %zu checkpoints to %s\n", points.size(), a.out.c_str());
  return kExitOk;
}

int run_fourier(FourierArgs& a) {
  set_threads(static_cast<int>(a.threads));
  return a.run.empty() ? run_checkpoint(a) : run_curve(a);
}

const CommandRow fourier_row{
    "fourier",
    "the Fourier analysis of a modular-addition model: key frequencies, neuron clusters, "
    "restricted and excluded loss",
    {"--checkpoint", "--run"},
    parse_fourier,
    run_fourier};

}  // namespace

}  // namespace gradlab::cli
