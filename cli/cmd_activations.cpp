// `gradlab activations`: the activations at the hook points of one prompt (and, on request,
// the loss's gradients with respect to them), or of a data set reduced to their mean or kept
// example by example, to HDF5: nn::run_with_cache from the command line.
#include <algorithm>
#include <cstdio>
#include <optional>

#include "autograd/error.h"
#include "cli/checkpoint_args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/input_set_option.h"
#include "cli/options.h"
#include "interp/files/activation_file.h"
#include "nn/hooks.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;

struct ActivationsArgs {
  ActivationsArgs() {
    CheckpointArgs& c = checkpoint;
    add_input_set_options(c, inputs, kInputs);
    c.options.add_options()(
        "names", po::value(&names)->multitoken(),
        "hook points to keep: names or globs ('blocks.*.attn.hook_pattern'); default every point "
        "(`gradlab hooks` lists them)")(
        "gradients", po::bool_switch(&gradients),
        "also keep <name>_grad, the gradient of the loss on the answer with respect to each (of "
        "a data set, each example's own: one example a batch)");
    add_output_options(c);
    add_checkpoint_options(c);
  }
  static constexpr InputSetFlags kInputs{
      .prompt = true, .reduce = true, .at = true, .memory = "the cache"};
  CheckpointArgs checkpoint{
      "gradlab activations: the activations at a model's hook points for one prompt, or reduced "
      "over a data set (docs/hooks.md)\nOptions"};
  const boost::program_options::options_description& options = checkpoint.options;
  InputSetArgs inputs;
  std::vector<std::string> names;
  bool gradients = false;
};

int parse_activations(const Arguments& args, ActivationsArgs& a) {
  if (const int code = parse_with_output("activations", args, a.checkpoint, "the activations");
      code >= 0) {
    return code;
  }
  return parse_input_set("activations", a.checkpoint, a.inputs, ActivationsArgs::kInputs);
}

// Runs the model on every batch of the data set, streaming the caches into the file.
void write_data_set(const ActivationsArgs& a, const InputSet& set,
                    const std::vector<nn::HookPointInfo>& points, const nn::HookFilter& filter,
                    int64_t rows) {
  nn::SequenceModel& model = set.model();
  const interp::ActivationSetLayout layout{set.examples, a.inputs.reduce == "none",
                                           a.inputs.at == "answer"};
  interp::write_activation_set_file(
      a.checkpoint.out, points, layout, [&](const interp::ActivationBatchSink& sink) {
        for_each_batch(set, rows, [&](const InputGroup&, const nn::SequenceBatch& batch, int64_t) {
          nn::ActivationCache cache;
          {
            nn::EvalScope eval(model);
            cache = nn::run_with_cache(model, batch, filter,
                                       {.gradients = a.gradients, .logits = a.gradients});
          }
          sink(batch, cache, answer_positions(batch, set.text()));
        });
      });
}

int run_activations(ActivationsArgs& a) {
  std::optional<InputSet> set;
  if (const int code = load_input_set("activations", a.checkpoint, a.inputs, set); code >= 0) {
    return code;
  }
  if (const int code = refuse_unequal_lengths("activations", a.checkpoint, *set,
                                              "activations keeps each point's positions");
      code >= 0) {
    return code;
  }
  nn::SequenceModel& model = set->model();
  const nn::SequenceBatch& first = set->groups.front().batch;
  if (set->prompt) {
    if (const int code =
            refuse_weights_above_limit("activations", a.checkpoint, *set->prompt, first);
        code >= 0) {
      return code;
    }
  }
  const std::vector<nn::HookPointInfo> points = nn::hook_points(model, first);
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
  double bytes = 0, forward = 0;
  for (const nn::HookPointInfo& point : points) {
    const double size = static_cast<double>(numel(point.shape)) * element;
    forward += size;
    if (filter->matches(point.name)) bytes += size;
  }
  if (a.gradients) bytes *= 2;
  if (const int code = refuse_above_memory_limit("activations", a.inputs.max_memory, bytes,
                                                 "the cache of --names", "; --names narrows it",
                                                 a.checkpoint.options);
      code >= 0) {
    return code;
  }
  if (a.inputs.given) {
    // A batch's loss is the mean over its rows: one example a batch keeps each gradient its own.
    const int64_t rows = a.gradients ? 1 : rows_per_batch(a.inputs, bytes + forward);
    write_data_set(a, *set, points, *filter, rows);
    std::printf("wrote the activations of %s (%s, %s) to %s\n", described(*set, a.inputs).c_str(),
                a.inputs.reduce == "none" ? "every example" : "their mean",
                a.inputs.at == "answer" ? "at the answer" : "every position",
                a.checkpoint.out.c_str());
    return kExitOk;
  }
  nn::ActivationCache cache;
  {
    nn::EvalScope eval(model);
    cache = nn::run_with_cache(model, first, *filter,
                               {.gradients = a.gradients, .logits = a.gradients});
  }
  interp::write_activation_file(a.checkpoint.out, first, set->groups.front().answers.front(), cache,
                                points);
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
