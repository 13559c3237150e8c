// `gradlab lens`: the logit lens of one prompt (interp/logit_lens.h): what each layer's residual
// stream would predict, read through the final LayerNorm and the head, as p(answer) and the top
// tokens per layer and position (or a data set's mean p(answer)), printed and optionally written
// to HDF5.
#include <cmath>
#include <cstdio>

#include "autograd/format.h"
#include "cli/checkpoint_args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/input_set_option.h"
#include "cli/intervene_option.h"
#include "cli/options.h"
#include "interp/files/lens_file.h"
#include "interp/logit_lens.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;

struct LensArgs {
  LensArgs() {
    add_input_set_options(checkpoint, inputs, kInputs);
    checkpoint.options.add_options()("top", po::value(&top)->default_value(3),
                                     "tokens shown per layer and position, most likely first");
    add_intervene_option(checkpoint.options, intervene, "the prompt's run");
    add_output_options(checkpoint,
                       {.help = "also write the lens to this (new) HDF5 file", .required = false});
    add_checkpoint_options(checkpoint);
  }
  CheckpointArgs checkpoint{
      "gradlab lens: the logit lens of one prompt: each layer's residual stream read through the "
      "final LayerNorm and the head (docs/hooks.md)\nOptions"};
  const boost::program_options::options_description& options = checkpoint.options;
  static constexpr InputSetFlags kInputs{
      .at = true, .at_default = "answer", .memory = "a batch's activations"};
  InputSetArgs inputs;  // a data set is reduced to the mean p(answer)
  int64_t top = 3;
  InterveneOption intervene;
};

int parse_lens(const Arguments& args, LensArgs& a) {
  if (const int code = parse_with_output("lens", args, a.checkpoint, "the logit lens"); code >= 0) {
    return code;
  }
  if (const int code = parse_input_set("lens", a.checkpoint, a.inputs, LensArgs::kInputs);
      code >= 0) {
    return code;
  }
  if (a.inputs.given && !a.checkpoint.vm["top"].defaulted()) {
    return usage_error("lens", "--top shows one prompt's tokens; a data set's lens is its mean",
                       a.options);
  }
  if (a.top < 1) return usage_error("lens", "--top must be at least 1", a.options);
  return parse_interventions("lens", a.intervene, a.options);
}

void print_lens(const PromptedRun& run, const nn::SequenceBatch& batch,
                const interp::LensProbabilities& lens) {
  std::printf(
      "the logit lens: each layer's residual stream through ln_f and the head; p(answer) and the "
      "top %lld tokens\n",
      static_cast<long long>(lens.top_k));
  size_t name_width = 0;
  for (const std::string& layer : lens.layers) name_width = std::max(name_width, layer.size());
  const int64_t positions = lens.positions;
  for (int64_t t = 0; t < positions; ++t) {
    const int64_t target = batch.targets.values[static_cast<size_t>(t)];
    if (target == nn::kIgnoreTarget) continue;
    std::printf("position %lld reads %s, answer %s\n", static_cast<long long>(t),
                shown(run, {batch.inputs.values[static_cast<size_t>(t)]}).c_str(),
                shown(run, {target}).c_str());
    for (size_t layer = 0; layer < lens.layers.size(); ++layer) {
      const size_t row = layer * static_cast<size_t>(positions) + static_cast<size_t>(t);
      std::printf("  %-*s  p(answer) %.4f  top", static_cast<int>(name_width),
                  lens.layers[layer].c_str(), lens.target_probability[row]);
      for (int64_t k = 0; k < lens.top_k; ++k) {
        const size_t at = row * static_cast<size_t>(lens.top_k) + static_cast<size_t>(k);
        std::printf("  %s %.4f", shown(run, {lens.top_tokens[at]}).c_str(),
                    lens.top_probabilities[at]);
      }
      std::printf("\n");
    }
  }
}

// The mean p(answer) per layer over a data set, printed and optionally written.
int run_data_set_lens(const LensArgs& a) {
  std::optional<InputSet> set;
  if (const int code = load_input_set("lens", a.checkpoint, a.inputs, set); code >= 0) return code;
  const bool at_answer = a.inputs.at == "answer";
  if (!at_answer) {
    if (const int code = refuse_unequal_lengths("lens", a.checkpoint, *set,
                                                "--at all means each position over the examples");
        code >= 0) {
      return code;
    }
  }
  nn::SequenceModel& model = set->model();
  std::optional<interp::AppliedInterventions> applied;
  if (const int code = apply_interventions("lens", a.intervene, set->trained, a.options, applied);
      code >= 0) {
    return code;
  }
  interp::LensReduction reduction;
  {
    nn::EvalScope eval(model);
    const int64_t rows = rows_per_batch(a.inputs, forward_bytes_per_row(*set));
    for_each_batch(*set, rows, [&](const InputGroup&, const nn::SequenceBatch& batch, int64_t) {
      reduction.add(interp::logit_lens(model, batch), batch.targets,
                    at_answer ? answer_positions(batch, set->text()) : std::vector<int64_t>{});
    });
  }
  const interp::LensMean mean = reduction.mean();
  std::printf("the logit lens over %s: the mean p(answer) of each layer %s\n",
              described(*set, a.inputs).c_str(),
              at_answer ? "at each one's answer" : "per position");
  for (size_t layer = 0; layer < mean.layers.size(); ++layer) {
    std::printf("  %-12s", mean.layers[layer].c_str());
    for (int64_t p = 0; p < mean.positions; ++p) {
      std::printf("  %.4f", mean.target_probability[layer * static_cast<size_t>(mean.positions) +
                                                    static_cast<size_t>(p)]);
    }
    std::printf("\n");
  }
  if (!a.checkpoint.out.empty()) {
    interp::write_lens_set_file(a.checkpoint.out, mean, a.inputs.at);
    std::printf("wrote the lens of %zu layers to %s\n", mean.layers.size(),
                a.checkpoint.out.c_str());
  }
  return kExitOk;
}

int run_lens(LensArgs& a) {
  if (a.inputs.given) return run_data_set_lens(a);
  std::optional<PromptedRun> loaded;
  if (const int code = load_prompted_run("lens", a.checkpoint, loaded); code >= 0) return code;
  nn::SequenceModel& model = *loaded->trained.model;
  const int64_t vocab = model.config().vocab_size;
  if (a.top > vocab) {
    return usage_error("lens",
                       "--top " + format_number(a.top) + " is more than the model's " +
                           format_number(vocab) + " tokens",
                       a.checkpoint.options);
  }
  std::optional<interp::AppliedInterventions> applied;
  if (const int code =
          apply_interventions("lens", a.intervene, loaded->trained, a.options, applied);
      code >= 0) {
    return code;
  }
  std::vector<int64_t> answer;
  const nn::SequenceBatch batch = answered_batch(*loaded, answer);
  std::vector<interp::LensLayer> layers;
  {
    nn::EvalScope eval(model);
    layers = interp::logit_lens(model, batch);
  }
  const interp::LensProbabilities lens = interp::lens_probabilities(layers, batch.targets, a.top);
  print_lens(*loaded, batch, lens);
  if (!a.checkpoint.out.empty()) {
    interp::write_lens_file(a.checkpoint.out, batch, answer, lens);
    std::printf("wrote the lens of %zu layers to %s\n", lens.layers.size(),
                a.checkpoint.out.c_str());
  }
  return kExitOk;
}

const CommandRow lens_row{"lens",
                          "the logit lens: what each layer would predict, per position",
                          {"--checkpoint", "--top"},
                          parse_lens,
                          run_lens};

}  // namespace

}  // namespace gradlab::cli
