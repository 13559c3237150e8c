// `gradlab sample`: text from a language model checkpoint, streamed as it is generated.

#include <cstdio>

#include "autograd/error.h"
#include "autograd/format.h"
#include "cli/checkpoint_args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/intervene_option.h"
#include "cli/options.h"
#include "data/text.h"
#include "nn/generate.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;

struct SampleArgs : CheckpointArgs {
  SampleArgs()
      : CheckpointArgs("gradlab sample: generate text with a language model checkpoint\nOptions") {
    add_help_option(options);
    add_checkpoint_option(options, checkpoint);
    options.add_options()("prompt", po::value(&prompt)->default_value("\n", "newline"),
                          "text to continue (its last --context tokens are read)")(
        "tokens", po::value(&sampling.tokens)->default_value(200), "tokens to generate")(
        "temperature", po::value(&sampling.temperature)->default_value(1.0, "1"),
        "divide the logits by this; 0: greedy")(
        "top-k", po::value(&sampling.top_k)->default_value(0),
        "draw among the k most likely tokens only (0: all)")(
        "seed", po::value(&sampling.seed)->default_value(0), "seed of the draws")(
        "no-cache", po::bool_switch(), "re-read the whole window for every token (slower)");
    add_intervene_option(options, intervene,
                         "every step (which then re-reads the whole window, as --no-cache)");
    add_threads_option(options, threads);
  }
  nn::SamplingOptions sampling;
  InterveneOption intervene;
};

int parse_sample(const Arguments& args, SampleArgs& a) {
  if (const int code = parse_or_usage("sample", args, a.options, a.vm); code >= 0) return code;
  // An intervention's positions are the window's: the cache would run one new position a pass.
  a.sampling.use_cache = !a.vm["no-cache"].as<bool>() && a.intervene.specs.empty();
  if (const int code = check_threads("sample", a.threads, a.options); code >= 0) return code;
  if (const int code = parse_interventions("sample", a.intervene, a.options); code >= 0) {
    return code;
  }
  // Non-finite numbers were refused by parse_or_usage.
  const auto negative = [&](const char* flag, const std::string& value) {
    return usage_error("sample", std::string(flag) + " must not be negative, got " + value,
                       a.options);
  };
  if (a.sampling.tokens < 0) return negative("--tokens", format_number(a.sampling.tokens));
  if (a.sampling.temperature < 0) {
    return negative("--temperature", format_number(a.sampling.temperature));
  }
  if (a.sampling.top_k < 0) return negative("--top-k", format_number(a.sampling.top_k));
  require_checkpoint_file(a.checkpoint);
  return -1;
}

int run_sample(SampleArgs& a) {
  const train::TrainedModel trained = load_trained(a);
  const data::LanguageModelTask* language_model = trained.language_model();
  if (!language_model) {
    throw ConfigError(a.checkpoint + ": a " + trained.task->name() +
                      " model, not a language model: try gradlab predict");
  }
  const data::Vocabulary& vocabulary = *trained.vocabulary;
  if (a.sampling.top_k > vocabulary.size()) {
    return usage_error("sample",
                       "--top-k " + format_number(a.sampling.top_k) + " is more than the " +
                           format_number(vocabulary.size()) + " tokens of the model's vocabulary",
                       a.options);
  }
  std::vector<int64_t> prompt;
  if (const int code = encode_prompt("sample", "--prompt", vocabulary, a.prompt, a.options, prompt);
      code >= 0) {
    return code;
  }
  std::optional<interp::AppliedInterventions> applied;
  if (const int code = apply_interventions("sample", a.intervene, trained, a.options, applied);
      code >= 0) {
    return code;
  }
  std::fputs(a.prompt.c_str(), stdout);
  nn::generate(*trained.model, language_model->context(), prompt, a.sampling,
               [&](int64_t token, const std::vector<float>&) {
                 std::fputs(vocabulary.decode(token).c_str(), stdout);
                 std::fflush(stdout);
               });
  std::fputs("\n", stdout);
  return kExitOk;
}

const CommandRow sample_row{"sample",
                            "generate text with a language model checkpoint",
                            {"--checkpoint", "--tokens"},
                            parse_sample,
                            run_sample};

}  // namespace

}  // namespace gradlab::cli
