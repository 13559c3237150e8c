// `gradlab predict`: greedy decoding of one prompt with a checkpoint, beside the right answer.
#include <cstdio>

#include "cli/checkpoint_args.h"
#include "cli/commands.h"
#include "train/trainer.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;

constexpr const char* kPredictCaption =
    "gradlab predict: greedy autoregressive decoding of one prompt\nOptions";

int parse_predict_options(const std::vector<std::string>& args, CheckpointArgs& a) {
  a.options.add_options()("input", po::value(&a.input)->required(), kInputHelp);
  return parse_with_checkpoint("predict", args, a);
}

}  // namespace

int parse_predict(const std::vector<std::string>& args) {
  CheckpointArgs a(kPredictCaption);
  return parse_predict_options(args, a);
}

int run_predict(const std::vector<std::string>& args) {
  CheckpointArgs a(kPredictCaption);
  if (const int code = parse_predict_options(args, a); code >= 0) return code;
  std::optional<PromptedRun> loaded;
  if (const int code = load_prompted_run("predict", a, loaded); code >= 0) return code;
  PromptedRun& run = *loaded;
  const std::vector<int64_t> output =
      run.loaded.model->greedy_decode(run.prompt, run.separator, run.answer_length);
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

}  // namespace gradlab::cli
