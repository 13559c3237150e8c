// `gradlab sample`: text from a language model checkpoint, streamed as it is generated.

#include <cstdio>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/threads.h"
#include "cli/checkpoint_args.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "data/text.h"
#include "nn/generate.h"
#include "train/trainer.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;

struct SampleArgs {
  po::options_description options{
      "gradlab sample: generate text with a language model checkpoint\nOptions"};
  std::string checkpoint, prompt;
  nn::SamplingOptions sampling;
  int64_t threads = 1;
  po::variables_map vm;
};

int parse_sample_options(const std::vector<std::string>& args, SampleArgs& a) {
  a.options.add_options()("help,h", "show this help")(
      "checkpoint", po::value(&a.checkpoint)->required(), "checkpoint file (.h5)")(
      "prompt", po::value(&a.prompt)->default_value("\n", "newline"),
      "text to continue (its last --context tokens are read)")(
      "tokens", po::value(&a.sampling.tokens)->default_value(200), "tokens to generate")(
      "temperature", po::value(&a.sampling.temperature)->default_value(1.0, "1"),
      "divide the logits by this; 0: greedy")("top-k",
                                              po::value(&a.sampling.top_k)->default_value(0),
                                              "draw among the k most likely tokens only (0: all)")(
      "seed", po::value(&a.sampling.seed)->default_value(0), "seed of the draws")(
      "no-cache", po::bool_switch(), "re-read the whole window for every token (slower)")(
      "threads", po::value(&a.threads)->default_value(1), "OpenMP threads");
  if (const int code = parse_or_usage("sample", args, a.options, a.vm); code >= 0) return code;
  a.sampling.use_cache = !a.vm["no-cache"].as<bool>();
  if (const int code = check_threads("sample", a.threads, a.options); code >= 0) return code;
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

}  // namespace

int parse_sample(const std::vector<std::string>& args) {
  SampleArgs a;
  return parse_sample_options(args, a);
}

int run_sample(const std::vector<std::string>& args) {
  SampleArgs a;
  if (const int code = parse_sample_options(args, a); code >= 0) return code;
  set_threads(static_cast<int>(a.threads));
  const train::LoadedModel loaded = train::load_model(a.checkpoint);
  const std::unique_ptr<data::Task> task = train::make_task(loaded.config);
  const data::LanguageModelTask* language_model = task->language_model();
  if (!language_model) {
    throw ConfigError(a.checkpoint + ": a " + task->name() +
                      " model, not a language model: try gradlab predict");
  }
  const data::Vocabulary& vocabulary = language_model->vocabulary();
  std::vector<int64_t> prompt;
  if (const int code = encode_prompt("sample", "--prompt", vocabulary, a.prompt, a.options, prompt);
      code >= 0) {
    return code;
  }
  std::fputs(a.prompt.c_str(), stdout);
  nn::generate(*loaded.model, language_model->context(), prompt, a.sampling,
               [&](int64_t token, const std::vector<float>&) {
                 std::fputs(vocabulary.decode(token).c_str(), stdout);
                 std::fflush(stdout);
               });
  std::fputs("\n", stdout);
  return kExitOk;
}

}  // namespace gradlab::cli
