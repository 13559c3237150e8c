// `gradlab eval`: a checkpoint's metrics on its task's held-out set, or a language model's loss
// and bits per character on any text.

#include <cmath>
#include <cstdio>

#include "autograd/threads.h"
#include "cli/checkpoint_args.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "data/tokenizer.h"
#include "train/trainer.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;

constexpr const char* kEvalCaption =
    "gradlab eval: metrics of a checkpoint on its held-out set, or a language model's loss on "
    "any text\nOptions";

int parse_eval_options(const std::vector<std::string>& args, CheckpointArgs& a) {
  a.options.add_options()("data", po::value(&a.input),
                          "a language model: score every token of this file");
  if (const int code = parse_with_checkpoint("eval", args, a); code >= 0) return code;
  return check_input_file("eval", "--data", a.input, a.options);
}

}  // namespace

int parse_eval(const std::vector<std::string>& args) {
  CheckpointArgs a(kEvalCaption);
  return parse_eval_options(args, a);
}

int run_eval(const std::vector<std::string>& args) {
  CheckpointArgs a(kEvalCaption);
  if (const int code = parse_eval_options(args, a); code >= 0) return code;
  if (const int code = check_text_flag("eval", a.checkpoint, "--data", a.input, a.options);
      code >= 0) {
    return code;
  }
  set_threads(static_cast<int>(a.threads));
  const train::LoadedRun run = train::load_run(a.checkpoint, a.input);
  const train::Metrics m = run.trainer->evaluate();
  const train::RunConfig& config = run.config;
  const std::unique_ptr<data::Task> task = train::make_task(config);
  if (const data::LanguageModelTask* language_model = task->language_model()) {
    std::printf(
        "checkpoint %s (step %lld, text %s, %s tokens)\nloss %.6f\nbits per %s %.4f\n"
        "token accuracy %.4f\n",
        a.checkpoint.c_str(), static_cast<long long>(run.trainer->step()),
        (a.input.empty() ? language_model->heldout_description() : a.input).c_str(),
        data::tokenizer_kind(language_model->vocabulary().kind()).name, m.loss,
        language_model->token_unit().c_str(), m.loss / std::log(2.0), m.token_accuracy);
    return kExitOk;
  }
  std::printf(
      "checkpoint %s (step %lld, task %s, %lld held-out sequences)\n"
      "loss %.6f\n%s %.4f\nexact match %.4f\n",
      a.checkpoint.c_str(), static_cast<long long>(run.trainer->step()), task->name().c_str(),
      static_cast<long long>(config.eval_size), m.loss, task->accuracy_name().c_str(),
      m.token_accuracy, m.exact_match);
  for (const train::PartLoss& part : m.parts) {
    std::printf("%s loss %.6f\n", part.name.c_str(), part.loss);
  }
  return kExitOk;
}

}  // namespace gradlab::cli
