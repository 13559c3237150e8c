// `gradlab predict`: greedy decoding of one prompt with a checkpoint, beside the right answer.
#include <cstdio>

#include "train/cli/checkpoint_args.h"
#include "train/cli/commands.h"
#include "train/trainer.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;

constexpr const char* kCaption =
    "gradlab predict: greedy autoregressive decoding of one prompt\nOptions";

int parse(const std::vector<std::string>& args, CheckpointArgs& a) {
  a.options.add_options()("input", po::value(&a.input)->required(),
                          "prompt tokens, e.g. \"3 1 4 1 5 9 2 6 5 3\"");
  return parse_with_checkpoint("predict", args, a);
}

}  // namespace

int parse_predict(const std::vector<std::string>& args) {
  CheckpointArgs a(kCaption);
  return parse(args, a);
}

int run_predict(const std::vector<std::string>& args) {
  CheckpointArgs a(kCaption);
  if (const int code = parse(args, a); code >= 0) return code;
  std::optional<PromptedRun> loaded;
  if (const int code = load_prompted_run("predict", a, loaded); code >= 0) return code;
  const auto& [run, task, prompt] = *loaded;
  const std::vector<int64_t> output =
      run.trainer->model().greedy_decode(prompt, data::kSeparator, task->answer_length());
  const std::vector<int64_t> expected = task->answer(prompt);
  std::printf("input    %s\noutput   %s\nexpected %s\n%s\n", join(prompt).c_str(),
              join(output).c_str(), join(expected).c_str(),
              output == expected ? "correct" : "wrong");
  return kExitOk;
}

}  // namespace gradlab::cli
