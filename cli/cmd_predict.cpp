// `gradlab predict`: greedy decoding of one prompt with a checkpoint, beside the right answer.
#include <cstdio>

#include "cli/checkpoint_args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/intervene_option.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;

struct PredictArgs : CheckpointArgs {
  PredictArgs()
      : CheckpointArgs("gradlab predict: greedy autoregressive decoding of one prompt\nOptions") {
    options.add_options()("input", po::value(&input)->required(), kInputHelp);
    add_intervene_option(options, intervene, "every step of the decoding");
    add_checkpoint_options(*this);
  }
  InterveneOption intervene;
};

int parse_predict(const Arguments& args, PredictArgs& a) {
  if (const int code = parse_with_checkpoint("predict", args, a); code >= 0) return code;
  return parse_interventions("predict", a.intervene, a.options);
}

int run_predict(PredictArgs& a) {
  std::optional<PromptedRun> loaded;
  if (const int code = load_prompted_run("predict", a, loaded); code >= 0) return code;
  PromptedRun& run = *loaded;
  std::optional<interp::AppliedInterventions> applied;
  if (const int code = apply_interventions("predict", a.intervene, run.trained, a.options, applied);
      code >= 0) {
    return code;
  }
  const std::vector<int64_t> output =
      run.trained.model->greedy_decode(run.prompt, run.separator, run.answer_length);
  std::vector<int64_t> input = run.prompt;
  // Raw ids are shown as given, and so is a prompt whose last token the model reads is not the
  // separator (induction: start token and first copy).
  if (!run.expected || run.separator != data::kSeparator) input.push_back(run.separator);
  std::printf("input    %s\noutput   %s\n", join(input).c_str(), join(output).c_str());
  if (run.expected) {
    std::printf("expected %s\n%s\n", join(*run.expected).c_str(),
                output == *run.expected ? "correct" : "wrong");
  }
  return kExitOk;
}

const CommandRow predict_row{"predict",
                             "greedy decoding of one prompt with a checkpoint",
                             {"--checkpoint"},
                             parse_predict,
                             run_predict};

}  // namespace

}  // namespace gradlab::cli
