// `gradlab eval`: a checkpoint's metrics on its task's held-out set, or a language model's loss
// and bits per character on any text, as it is or with --intervene's changes to its activations.

#include <cmath>
#include <cstdio>

#include "cli/checkpoint_args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/intervene_option.h"
#include "cli/options.h"
#include "data/tokenizer.h"
#include "interp/ablation.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;

struct EvalArgs : CheckpointArgs {
  EvalArgs()
      : CheckpointArgs(
            "gradlab eval: metrics of a checkpoint on its held-out set, or a language model's "
            "loss on any text\nOptions") {
    options.add_options()("data", po::value(&input),
                          "a language model: score every token of this file");
    add_intervene_option(options, intervene);
    add_checkpoint_options(*this);
  }
  InterveneOption intervene;
};

int parse_eval(const Arguments& args, EvalArgs& a) {
  if (const int code = parse_with_checkpoint("eval", args, a); code >= 0) return code;
  if (const int code = parse_interventions("eval", a.intervene, a.options); code >= 0) return code;
  return check_input_file("eval", "--data", a.input, a.options);
}

int run_eval(EvalArgs& a) {
  if (const int code = check_text_flag("eval", a.checkpoint, "--data", a.input, a.options);
      code >= 0) {
    return code;
  }
  const train::TrainedModel trained = load_trained(a);
  const std::unique_ptr<train::Trainer> trainer = train::scoring_trainer(trained, a.input);
  const interp::HeldOutEvaluation<train::Metrics> heldout{
      trainer->model(), trainer->heldout(), [&trainer] { return trainer->evaluate(); }};
  train::Metrics m;
  {
    std::optional<interp::AppliedInterventions> applied;
    if (const int code = apply_interventions("eval", a.intervene, heldout, a.options, applied);
        code >= 0) {
      return code;
    }
    m = heldout.evaluate();
  }
  for (const std::string& spec : a.intervene.specs) std::printf("intervened %s\n", spec.c_str());
  // The rows evaluate() read: a task may size its held-out set without --eval-size (modular
  // holds out every pair it does not train on).
  const auto evaluated = static_cast<long long>(nn::rows_in(heldout.heldout));
  const data::Task* task = trained.task.get();
  if (const data::LanguageModelTask* language_model = trained.language_model()) {
    std::printf(
        "checkpoint %s (step %lld, text %s, %s tokens, %lld windows)\nloss %.6f\nbits per %s "
        "%.4f\ntoken accuracy %.4f\n",
        a.checkpoint.c_str(), static_cast<long long>(trained.step),
        (a.input.empty() ? language_model->heldout_description() : a.input).c_str(),
        data::tokenizer_kind(language_model->vocabulary().kind()).name, evaluated, m.loss,
        language_model->token_unit().c_str(), m.loss / std::log(2.0), m.token_accuracy);
    return kExitOk;
  }
  std::printf(
      "checkpoint %s (step %lld, task %s, %lld held-out sequences)\n"
      "loss %.6f\n%s %.4f\nexact match %.4f\n",
      a.checkpoint.c_str(), static_cast<long long>(trained.step), task->name().c_str(), evaluated,
      m.loss, task->accuracy_name().c_str(), m.token_accuracy, m.exact_match);
  for (const train::PartLoss& part : m.parts) {
    std::printf("%s loss %.6f\n", part.name.c_str(), part.loss);
  }
  return kExitOk;
}

const CommandRow eval_row{"eval",
                          "metrics of a checkpoint on the held-out set",
                          {"--checkpoint", "--data"},
                          parse_eval,
                          run_eval};

}  // namespace

}  // namespace gradlab::cli
