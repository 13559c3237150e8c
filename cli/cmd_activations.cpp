// `gradlab activations`: the activations at the hook points of one prompt (and, on request,
// the loss's gradients with respect to them), to HDF5: nn::run_with_cache from the command line.
#include <algorithm>
#include <cstdio>
#include <optional>

#include "autograd/error.h"
#include "cli/checkpoint_args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "interp/files/activation_file.h"
#include "nn/hooks.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;

struct ActivationsArgs {
  ActivationsArgs() {
    CheckpointArgs& c = checkpoint;
    add_prompt_options(c);
    c.options.add_options()(
        "names", po::value(&names)->multitoken(),
        "hook points to keep: names or globs ('blocks.*.attn.hook_pattern'); default every point "
        "(`gradlab hooks` lists them)")(
        "gradients", po::bool_switch(&gradients),
        "also keep <name>_grad, the gradient of the loss on the answer with respect to each");
    add_max_memory_option(c.options, max_memory, "the cache");
    add_output_options(c);
    add_checkpoint_options(c);
  }
  CheckpointArgs checkpoint{
      "gradlab activations: the activations at a model's hook points for one prompt "
      "(docs/hooks.md)\nOptions"};
  const boost::program_options::options_description& options = checkpoint.options;
  std::vector<std::string> names;
  bool gradients = false;
  double max_memory = 0;  // GiB; 0: 80% of the machine's memory
};

int parse_activations(const Arguments& args, ActivationsArgs& a) {
  if (const int code = parse_with_output("activations", args, a.checkpoint, "the activations");
      code >= 0) {
    return code;
  }
  return check_max_memory("activations", a.max_memory, a.options);
}

int run_activations(ActivationsArgs& a) {
  std::optional<PromptedRun> loaded;
  if (const int code = load_prompted_run("activations", a.checkpoint, loaded); code >= 0) {
    return code;
  }
  nn::SequenceModel& model = *loaded->trained.model;
  std::vector<int64_t> answer;
  const nn::SequenceBatch batch = answered_batch(*loaded, answer);
  if (const int code = refuse_weights_above_limit("activations", a.checkpoint, *loaded, batch);
      code >= 0) {
    return code;
  }
  const std::vector<nn::HookPointInfo> points = nn::hook_points(model, batch);
  std::vector<std::string> patterns = a.names;
  if (patterns.empty()) patterns.push_back("*");
  std::optional<nn::HookFilter> filter;
  try {
    filter = nn::any_of_points(points, patterns, "--names");
  } catch (const ConfigError& e) {
    return usage_error("activations", e.what(), a.checkpoint.options);
  }
  // The listing is for one sequence, which is what runs: the cache holds those shapes, in the
  // model's dtype.
  const auto element = static_cast<double>(dtype_size(model.parameters().front().dtype()));
  double bytes = 0;
  for (const nn::HookPointInfo& point : points) {
    if (filter->matches(point.name)) bytes += static_cast<double>(numel(point.shape)) * element;
  }
  if (a.gradients) bytes *= 2;
  if (const int code =
          refuse_above_memory_limit("activations", a.max_memory, bytes, "the cache of --names",
                                    "; --names narrows it", a.checkpoint.options);
      code >= 0) {
    return code;
  }
  nn::ActivationCache cache;
  {
    nn::EvalScope eval(model);
    cache = nn::run_with_cache(model, batch, *filter,
                               {.gradients = a.gradients, .logits = a.gradients});
  }
  interp::write_activation_file(a.checkpoint.out, batch, answer, cache, points);
  std::printf("wrote %zu activations (%.1f kB) to %s\n", cache.names().size(),
              static_cast<double>(cache.bytes()) / 1e3, a.checkpoint.out.c_str());
  return kExitOk;
}

const CommandRow activations_row{"activations",
                                 "activations (and gradients) at hook points, to HDF5",
                                 {"--checkpoint", "--names"},
                                 parse_activations,
                                 run_activations};

}  // namespace

}  // namespace gradlab::cli
