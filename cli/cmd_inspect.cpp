// `gradlab inspect`: a checkpoint's configuration and parameter table.
#include <cmath>
#include <cstdio>

#include "autograd/format.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "train/checkpoint.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;

// The command line of inspect.
struct InspectArgs {
  InspectArgs() {
    add_help_option(options);
    add_checkpoint_option(options, path);
  }
  po::options_description options{
      "gradlab inspect: configuration and parameters of a checkpoint\nOptions"};
  std::string path;
  po::variables_map vm;
};

int parse_inspect(const Arguments& args, InspectArgs& a) {
  po::positional_options_description positional;
  positional.add("checkpoint", 1);
  if (const int code = parse_or_usage("inspect", args, a.options, a.vm, &positional); code >= 0) {
    return code;
  }
  require_checkpoint_file(a.path);
  return -1;
}

// As stored, without the checks of train::load_trained_model: inspect shows what a reader
// refuses.
int run_inspect(InspectArgs& a) {
  const std::string& path = a.path;
  const train::CheckpointData data = train::read_checkpoint(path);
  std::printf(
      "%s: step %lld, optimizer step %lld, best evaluation score %.4f (step %lld)\n"
      "(the held-out exact match; for a language model, minus the held-out loss)\n\n"
      "config:\n",
      path.c_str(), static_cast<long long>(data.train.step),
      static_cast<long long>(data.optimizer_step), data.train.best_metric,
      static_cast<long long>(data.train.best_step));
  // As stored, unchecked (inspect shows what a reader refuses), one line each: a text's
  // vocabulary holds a newline.
  for (const auto& [key, value] : data.config) {
    std::printf("  %-18s %s\n", key.c_str(), one_line(train::to_string(value)).c_str());
  }
  std::printf("\n  %-40s %-12s %8s %12s %12s\n", "parameter", "shape", "count", "mean", "std");
  int64_t total = 0;
  for (const auto& [name, t] : data.model) {
    const std::vector<double> v = t.to_vector();
    double mean = 0, var = 0;
    for (double x : v) mean += x;
    mean /= std::max<size_t>(v.size(), 1);
    for (double x : v) var += (x - mean) * (x - mean);
    const double stddev = std::sqrt(var / std::max<size_t>(v.size(), 1));
    std::printf("  %-40s %-12s %8lld %12.5f %12.5f\n", name.c_str(),
                gradlab::to_string(t.shape()).c_str(), static_cast<long long>(t.numel()), mean,
                stddev);
    total += t.numel();
  }
  std::printf("\n  total parameters %lld\n", static_cast<long long>(total));
  return kExitOk;
}

const CommandRow inspect_row{"inspect",
                             "configuration and parameter table of a checkpoint",
                             {"--checkpoint"},
                             parse_inspect,
                             run_inspect};

}  // namespace

}  // namespace gradlab::cli
