// The option groups of the commands that read a checkpoint, and the reading of their prompts.
#include "cli/checkpoint_args.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <sstream>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/graph.h"
#include "autograd/threads.h"
#include "cli/options.h"
#include "data/tasks.h"
#include "train/checkpoint.h"
#include "train/config.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;

// "3 1 4 1 5" -> tokens; a malformed list is a usage error (returned as an empty optional).
std::optional<std::vector<int64_t>> parse_tokens(const std::string& text) {
  std::vector<int64_t> tokens;
  std::istringstream in(text);
  for (std::string word; in >> word;) {
    try {
      size_t used = 0;
      tokens.push_back(std::stoll(word, &used));
      if (used != word.size()) return std::nullopt;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return tokens;
}

// Splits run.prompt, raw ids, into the prompt and its separator, and sizes the answer to the
// positions the model has left; returns what is wrong with the ids, or "".
std::string read_raw_ids(PromptedRun& run) {
  const nn::ModelConfig& net = run.trained.config.net;
  if (run.prompt.size() < 2) {
    return "raw token ids: give at least 2 (the prompt and the id that ends it)";
  }
  for (const int64_t id : run.prompt) {
    if (id < 0 || id >= net.vocab_size) {
      return "token " + std::to_string(id) + " is not an id in [0, " +
             std::to_string(net.vocab_size) + ")";
    }
  }
  run.separator = run.prompt.back();
  run.prompt.pop_back();
  const int64_t prompt_length = static_cast<int64_t>(run.prompt.size());
  const std::string& kind = run.trained.config.model;
  while (run.answer_length < net.max_len &&
         nn::positions_needed(kind, prompt_length, run.answer_length + 1) <= net.max_len) {
    ++run.answer_length;
  }
  if (run.answer_length == 0) {
    return std::to_string(prompt_length + 1) + " ids leave no position to decode (the model has " +
           std::to_string(net.max_len) + ")";
  }
  return "";
}

// Reads a.prompt, a language model's text, into run (the model says its next token); returns
// -1 to go on, or the usage exit code.
int read_text_prompt(const std::string& command, const CheckpointArgs& a,
                     const data::LanguageModelTask& language_model, const std::string& flag,
                     const std::string& text, PromptedRun& run) {
  if (const int code =
          encode_prompt(command, flag, language_model.vocabulary(), text, a.options, run.prompt);
      code >= 0) {
    return code;
  }
  const int64_t length = static_cast<int64_t>(run.prompt.size());
  if (length > language_model.context()) {
    return usage_error(command,
                       flag + ": " + format_number(length) +
                           " tokens are more than the model reads at once (its context is " +
                           format_number(language_model.context()) + ")",
                       a.options);
  }
  run.answer_length = 1;
  return -1;
}

// Why a.out may not be written, or "".
std::string refuse_output(const CheckpointArgs& a, const std::string& contents) {
  std::error_code error;
  if (a.out.empty() || !std::filesystem::exists(a.out, error)) return "";
  const std::string out = "--out " + a.out;
  if (std::filesystem::equivalent(a.out, a.checkpoint, error))
    return out + " is the checkpoint being read";
  if (!std::filesystem::is_regular_file(a.out, error))
    return out + " exists and is not a regular file";
  try {
    train::read_checkpoint_config(a.out);
    return out + " is a checkpoint; write " + contents + " to a file of their own";
  } catch (const CheckpointError&) {
    // not a checkpoint (an earlier attention file, say)
  }
  return a.overwrite ? "" : out + " already exists; pass --overwrite to replace it";
}

}  // namespace

const char* const kInputHelp =
    "the prompt: tokens of the checkpoint's task, e.g. \"3 1 4 1 5 9 2 6 5 3\"; for a "
    "checkpoint of a program's own data, raw token ids in [0, vocab-size): the last one ends the "
    "prompt and the model decodes what follows, as many tokens as its positions leave room for";

void add_prompt_options(CheckpointArgs& a) {
  a.takes_text = true;
  a.options.add_options()("input", po::value(&a.input), kInputHelp)(
      "prompt", po::value(&a.prompt),
      "for a language model's checkpoint instead of --input: text to read, in the checkpoint's "
      "vocabulary and at most its context long; the model's next token is the answer");
}

int encode_prompt(const std::string& command, const std::string& flag,
                  const data::Vocabulary& vocabulary, const std::string& text,
                  const po::options_description& options, std::vector<int64_t>& tokens) {
  try {
    tokens = vocabulary.encode(text);
  } catch (const ConfigError& e) {
    return usage_error(command, flag + ": " + e.what(), options);
  }
  return -1;
}

void add_checkpoint_options(CheckpointArgs& a) {
  add_help_option(a.options);
  add_checkpoint_option(a.options, a.checkpoint);
  add_threads_option(a.options, a.threads);
}

int parse_with_checkpoint(const std::string& command, const std::vector<std::string>& args,
                          CheckpointArgs& a) {
  if (const int code = parse_or_usage(command, args, a.options, a.vm); code >= 0) return code;
  if (const int code = check_threads(command, a.threads, a.options); code >= 0) return code;
  if (a.takes_text && a.vm.count("input") == a.vm.count("prompt")) {
    return usage_error(command,
                       "give exactly one of --input (a toy task's prompt) and --prompt (a language "
                       "model's text)",
                       a.options);
  }
  require_checkpoint_file(a.checkpoint);
  return -1;
}

int read_prompt(const std::string& command, const CheckpointArgs& a, train::TrainedModel trained,
                const std::string& flag, const std::string& text,
                std::optional<PromptedRun>& loaded) {
  const bool raw = trained.own_data;
  const std::shared_ptr<data::Task> task = trained.task;
  if (const data::LanguageModelTask* language_model = trained.language_model()) {
    PromptedRun run{std::move(trained), {}, 0, 0, std::nullopt};
    if (const int code = read_text_prompt(command, a, *language_model, flag, text, run);
        code >= 0) {
      return code;
    }
    loaded.emplace(std::move(run));
    return -1;
  }
  const auto tokens = parse_tokens(text);
  if (!tokens) {
    return usage_error(command, flag + ": " + quote(text) + " is not a list of integers",
                       a.options);
  }
  PromptedRun run{std::move(trained), *tokens, 0, 0, std::nullopt};
  if (raw) {
    if (const std::string problem = read_raw_ids(run); !problem.empty()) {
      return usage_error(command, flag + ": " + problem, a.options);
    }
  } else {
    const data::SequenceTask* sequence_task = task->sequence_task();
    if (!sequence_task) {
      throw ConfigError(a.checkpoint + ": a " + task->name() +
                        " model answers inside its sequences, not after a prompt: " + command +
                        " has no prompt to read; score it with gradlab eval");
    }
    try {
      sequence_task->validate_prompt(*tokens);
    } catch (const ConfigError& e) {
      return usage_error(command, flag + ": " + e.what(), a.options);
    }
    // The model reads the task's prefix and decodes the answer after its last token (the
    // separator, or for induction the first copy's last token).
    run.prompt = sequence_task->decoding_prefix(*tokens);
    run.separator = run.prompt.back();
    run.prompt.pop_back();
    run.expected = sequence_task->answer(*tokens);
    run.answer_length = static_cast<int64_t>(run.expected->size());
  }
  loaded.emplace(std::move(run));
  return -1;
}

int load_prompted_run(const std::string& command, const CheckpointArgs& a,
                      std::optional<PromptedRun>& loaded) {
  train::TrainedModel trained = load_trained(a);
  const bool language_model = trained.language_model() != nullptr;
  if (language_model && !a.takes_text) {
    throw ConfigError(a.checkpoint + ": a language model: " + command +
                      " reads a toy task's prompt; generate text with gradlab sample");
  }
  if (language_model && !a.vm.count("prompt")) {
    return usage_error(
        command, a.checkpoint + " is a language model: give its text with --prompt, not --input",
        a.options);
  }
  if (!language_model && a.vm.count("prompt")) {
    return usage_error(
        command,
        a.checkpoint + " is a toy task's model: give its prompt with --input, not --prompt",
        a.options);
  }
  return language_model ? read_prompt(command, a, std::move(trained), "--prompt", a.prompt, loaded)
                        : read_prompt(command, a, std::move(trained), "--input", a.input, loaded);
}

void add_output_options(CheckpointArgs& a, const OutputFlag& flag) {
  auto* out = po::value(&a.out);
  if (flag.required) out->required();
  a.options.add_options()("out", out, flag.help)("overwrite", po::bool_switch(&a.overwrite),
                                                 "replace --out if it exists (never a checkpoint)");
}

train::TrainedModel load_trained(const CheckpointArgs& a) {
  set_threads(static_cast<int>(a.threads));
  return train::load_trained_model(a.checkpoint);
}

int parse_with_output(const std::string& command, const std::vector<std::string>& args,
                      CheckpointArgs& a, const std::string& contents) {
  if (const int code = parse_with_checkpoint(command, args, a); code >= 0) return code;
  if (a.out.empty()) {
    return a.overwrite
               ? usage_error(command, "--overwrite replaces an --out; none is given", a.options)
               : -1;
  }
  if (const std::string refusal = refuse_output(a, contents); !refusal.empty()) {
    return usage_error(command, refusal, a.options);
  }
  return -1;
}

int check_text_flag(const std::string& command, const std::string& checkpoint,
                    const std::string& flag, const std::string& value,
                    const po::options_description& options) {
  if (value.empty()) return -1;
  const train::RunConfig config = train::checkpoint_run_config(checkpoint);
  if (data::task_kind(config.task.name).own_data || !train::make_task(config)->language_model()) {
    return usage_error(command,
                       flag + " applies to a language model's checkpoint; " + checkpoint +
                           " is a model of task " + config.task.name,
                       options);
  }
  return -1;
}

int refuse_weights_above_limit(const std::string& command, const CheckpointArgs& a,
                               const PromptedRun& run, const nn::SequenceBatch& batch) {
  // The longest sequence stands for Tq and Tk (an encoder's source may be the longer).
  const int64_t T =
      std::max(batch.inputs.shape.at(1), batch.source.shape.empty() ? 0 : batch.source.shape.at(1));
  const int64_t H = run.trained.model->config().attention.num_heads;
  try {
    train::check_elements(
        "[B, H, T, T] attention weights", {1, H, T, T},
        {std::string(run.text() ? "--prompt" : "--input") + " (" + format_number(T) + " positions)",
         "the checkpoint's --heads " + format_number(H)});
  } catch (const ConfigError& e) {
    return usage_error(command, e.what(), a.options);
  }
  return -1;
}

nn::SequenceBatch answered_batch(const PromptedRun& run, std::vector<int64_t>& answer) {
  nn::SequenceModel& model = *run.trained.model;
  if (run.text()) {
    const int64_t length = static_cast<int64_t>(run.prompt.size());
    const Indices inputs({1, length}, run.prompt);
    {
      NoGradGuard no_grad;
      nn::EvalScope eval(model);
      answer = {nn::most_likely_last_token(model.forward(nn::SequenceBatch{{}, inputs, {}}))};
    }
    std::vector<int64_t> targets(run.prompt.begin() + 1, run.prompt.end());
    targets.push_back(answer.front());
    return {{}, inputs, Indices({1, length}, std::move(targets))};
  }
  answer = model.greedy_decode(run.prompt, run.separator, run.answer_length);
  std::vector<int64_t> sample = run.prompt;
  sample.push_back(run.separator);
  sample.insert(sample.end(), answer.begin(), answer.end());
  return model.make_batch(Indices({1, static_cast<int64_t>(sample.size())}, sample),
                          static_cast<int64_t>(run.prompt.size()));
}

std::string join(const std::vector<int64_t>& tokens) {
  std::string out;
  for (int64_t t : tokens) {
    if (!out.empty()) out += ' ';
    out += std::to_string(t);
  }
  return out;
}

std::string shown(const PromptedRun& run, const std::vector<int64_t>& tokens) {
  if (!run.text()) return join(tokens);
  std::string text;
  for (const int64_t token : tokens) text += run.trained.vocabulary->decode(token);
  return quote(text);
}

}  // namespace gradlab::cli
