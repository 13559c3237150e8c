#include "train/cli/checkpoint_args.h"

#include <optional>
#include <sstream>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/threads.h"
#include "train/cli/options.h"

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

}  // namespace

int parse_with_checkpoint(const std::string& command, const std::vector<std::string>& args,
                          CheckpointArgs& a) {
  a.options.add_options()("help,h", "show this help")(
      "checkpoint", po::value(&a.checkpoint)->required(), "checkpoint file (.h5)")(
      "threads", po::value(&a.threads)->default_value(1), "OpenMP threads");
  if (const int code = parse_or_usage(command, args, a.options, a.vm); code >= 0) return code;
  if (const int code = check_threads(command, a.threads, a.options); code >= 0) return code;
  require_checkpoint_file(a.checkpoint);
  return -1;
}

int load_prompted_run(const std::string& command, const CheckpointArgs& a,
                      std::optional<PromptedRun>& loaded) {
  set_threads(static_cast<int>(a.threads));
  train::LoadedRun run = train::load_run(a.checkpoint);
  const std::shared_ptr<const data::Task> made = train::make_task(run.config);
  if (!made->sequence_task()) {
    throw ConfigError(a.checkpoint + ": a language model: " + command +
                      " reads a toy task's prompt; generate text with gradlab sample");
  }
  const std::shared_ptr<const data::SequenceTask> task(made, made->sequence_task());
  const auto tokens = parse_tokens(a.input);
  if (!tokens) {
    return usage_error(command, "--input: " + quote(a.input) + " is not a list of integers",
                       a.options);
  }
  try {
    task->validate_prompt(*tokens);
  } catch (const ConfigError& e) {
    return usage_error(command, std::string("--input: ") + e.what(), a.options);
  }
  loaded.emplace(PromptedRun{std::move(run), task, *tokens});
  return -1;
}

std::string join(const std::vector<int64_t>& tokens) {
  std::string out;
  for (int64_t t : tokens) {
    if (!out.empty()) out += ' ';
    out += std::to_string(t);
  }
  return out;
}

}  // namespace gradlab::cli
