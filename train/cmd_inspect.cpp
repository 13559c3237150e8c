// The subcommands that read a checkpoint: eval, predict, attention and inspect.
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <sstream>

#include "autograd/graph.h"
#include "train/attention_file.h"
#include "train/commands.h"
#include "train/options.h"
#include "train/trainer.h"

namespace gradlab::train {
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

std::string join(const std::vector<int64_t>& tokens) {
  std::string out;
  for (int64_t t : tokens) {
    if (!out.empty()) out += ' ';
    out += std::to_string(t);
  }
  return out;
}

// The command line of eval, predict or attention: the options and the values bound to them.
struct CheckpointArgs {
  explicit CheckpointArgs(const char* caption) : options(caption) {}
  po::options_description options;
  std::string checkpoint, input, out;
  int64_t threads = 1;
  po::variables_map vm;
};

constexpr const char* kEvalCaption =
    "gradlab eval: metrics of a checkpoint on the held-out set\nOptions";
constexpr const char* kPredictCaption =
    "gradlab predict: greedy autoregressive decoding of one prompt\nOptions";
constexpr const char* kAttentionCaption =
    "gradlab attention: attention weights of every layer and head for one prompt\nOptions";

// Parses --checkpoint (required) plus extra options; returns -1 to go on or an exit code.
int parse_with_checkpoint(const std::string& command, const std::vector<std::string>& args,
                          CheckpointArgs& a) {
  a.options.add_options()("help,h", "show this help")(
      "checkpoint", po::value(&a.checkpoint)->required(), "checkpoint file (.h5)")(
      "threads", po::value(&a.threads)->default_value(1), "OpenMP threads");
  if (const int code = parse_or_usage(command, args, a.options, a.vm); code >= 0) return code;
  if (a.threads < 1) return usage_error(command, "--threads must be positive", a.options);
  return -1;
}

int parse_eval(const std::vector<std::string>& args, CheckpointArgs& a) {
  return parse_with_checkpoint("eval", args, a);
}

int parse_predict(const std::vector<std::string>& args, CheckpointArgs& a) {
  a.options.add_options()("input", po::value(&a.input)->required(),
                          "prompt tokens, e.g. \"3 1 4 1 5 9 2 6 5 3\"");
  return parse_with_checkpoint("predict", args, a);
}

int parse_attention(const std::vector<std::string>& args, CheckpointArgs& a) {
  a.options.add_options()("input", po::value(&a.input)->required(), "prompt tokens")(
      "out", po::value(&a.out)->required(), "output HDF5 file");
  return parse_with_checkpoint("attention", args, a);
}

// The command line of inspect.
struct InspectArgs {
  po::options_description options{
      "gradlab inspect: configuration and parameters of a checkpoint\nOptions"};
  std::string path;
  po::variables_map vm;
};

int parse_inspect(const std::vector<std::string>& args, InspectArgs& a) {
  a.options.add_options()("help,h", "show this help")("checkpoint", po::value(&a.path)->required(),
                                                      "checkpoint file (.h5)");
  po::positional_options_description positional;
  positional.add("checkpoint", 1);
  return parse_or_usage("inspect", args, a.options, a.vm, &positional);
}

// Reads --input as the task's prompt; returns -1 to go on or a usage exit code.
int read_prompt(const std::string& command, const std::string& input, const data::Task& task,
                const po::options_description& options, std::vector<int64_t>& prompt) {
  const auto tokens = parse_tokens(input);
  if (!tokens)
    return usage_error(command, "--input: '" + input + "' is not a list of integers", options);
  try {
    task.validate_prompt(*tokens);
  } catch (const ConfigError& e) {
    return usage_error(command, std::string("--input: ") + e.what(), options);
  }
  prompt = *tokens;
  return -1;
}

}  // namespace

int parse_eval(const std::vector<std::string>& args) {
  CheckpointArgs a(kEvalCaption);
  return parse_eval(args, a);
}

int parse_predict(const std::vector<std::string>& args) {
  CheckpointArgs a(kPredictCaption);
  return parse_predict(args, a);
}

int parse_attention(const std::vector<std::string>& args) {
  CheckpointArgs a(kAttentionCaption);
  return parse_attention(args, a);
}

int parse_inspect(const std::vector<std::string>& args) {
  InspectArgs a;
  return parse_inspect(args, a);
}

int run_eval(const std::vector<std::string>& args) {
  CheckpointArgs a(kEvalCaption);
  if (int code = parse_eval(args, a); code >= 0) return code;
  omp_set_num_threads(static_cast<int>(a.threads));
  const std::string& checkpoint = a.checkpoint;
  const auto trainer = load_trainer(checkpoint);
  const Metrics m = trainer->evaluate();
  std::printf(
      "checkpoint %s (step %lld, task %s, %lld held-out sequences)\n"
      "loss %.6f\ntoken accuracy %.4f\nexact match %.4f\n",
      checkpoint.c_str(), static_cast<long long>(trainer->step()),
      trainer->config().task.name.c_str(), static_cast<long long>(trainer->config().eval_size),
      m.loss, m.token_accuracy, m.exact_match);
  return kExitOk;
}

int run_predict(const std::vector<std::string>& args) {
  CheckpointArgs a(kPredictCaption);
  if (int code = parse_predict(args, a); code >= 0) return code;
  omp_set_num_threads(static_cast<int>(a.threads));
  const auto trainer = load_trainer(a.checkpoint);
  std::vector<int64_t> prompt;
  if (int code = read_prompt("predict", a.input, trainer->task(), a.options, prompt); code >= 0) {
    return code;
  }
  const std::vector<int64_t> output = trainer->greedy_answer(prompt);
  const std::vector<int64_t> expected = trainer->task().answer(prompt);
  std::printf("input    %s\noutput   %s\nexpected %s\n%s\n", join(prompt).c_str(),
              join(output).c_str(), join(expected).c_str(),
              output == expected ? "correct" : "wrong");
  return kExitOk;
}

int run_attention(const std::vector<std::string>& args) {
  CheckpointArgs a(kAttentionCaption);
  if (int code = parse_attention(args, a); code >= 0) return code;
  omp_set_num_threads(static_cast<int>(a.threads));
  const std::string& out = a.out;
  const auto trainer = load_trainer(a.checkpoint);
  std::vector<int64_t> prompt;
  if (int code = read_prompt("attention", a.input, trainer->task(), a.options, prompt); code >= 0) {
    return code;
  }
  // The model reads prompt, separator and its own greedy answer (minus the last token), as in
  // training; the encoder-decoder reads the prompt and separator + answer.
  const std::vector<int64_t> answer = trainer->greedy_answer(prompt);
  const bool decoder = trainer->config().model == "decoder";
  const std::vector<int64_t> source = decoder ? std::vector<int64_t>{} : prompt;
  std::vector<int64_t> inputs = decoder ? prompt : std::vector<int64_t>{};
  inputs.push_back(data::kSeparator);
  inputs.insert(inputs.end(), answer.begin(), answer.end() - 1);
  ModelBatch batch;
  if (!source.empty()) batch.source = Indices({1, static_cast<int64_t>(source.size())}, source);
  batch.inputs = Indices({1, static_cast<int64_t>(inputs.size())}, inputs);
  std::vector<Tensor> weights;
  {
    NoGradGuard no_grad;
    trainer->module().eval();
    trainer->forward(batch, &weights);
  }
  write_attention_file(out, {.source = source, .inputs = inputs, .answer = answer}, weights,
                       trainer->config().net.num_layers);
  std::printf("wrote %zu layers of attention weights to %s\n", weights.size(), out.c_str());
  return kExitOk;
}

int run_inspect(const std::vector<std::string>& args) {
  InspectArgs a;
  if (int code = parse_inspect(args, a); code >= 0) return code;
  const std::string& path = a.path;
  const CheckpointData data = read_checkpoint(path);
  std::printf("%s: step %lld, optimizer step %lld, best exact match %.4f (step %lld)\n\nconfig:\n",
              path.c_str(), static_cast<long long>(data.train.step),
              static_cast<long long>(data.optimizer_step), data.train.best_metric,
              static_cast<long long>(data.train.best_step));
  for (const auto& [key, value] : data.config) {
    std::printf("  %-18s %s\n", key.c_str(), to_string(value).c_str());
  }
  std::printf("\n  %-40s %-12s %8s %12s %12s\n", "parameter", "shape", "count", "mean", "std");
  int64_t total = 0;
  for (const auto& [name, t] : data.model) {
    const std::vector<double> v = t.to_vector();
    double mean = 0, var = 0;
    for (double x : v) mean += x;
    mean /= std::max<size_t>(v.size(), 1);
    for (double x : v) var += (x - mean) * (x - mean);
    const double stddev = std::sqrt(var / std::max<size_t>(v.size(), 1));
    std::printf("  %-40s %-12s %8lld %12.5f %12.5f\n", name.c_str(),
                gradlab::to_string(t.shape()).c_str(), static_cast<long long>(t.numel()), mean,
                stddev);
    total += t.numel();
  }
  std::printf("\n  total parameters %lld\n", static_cast<long long>(total));
  return kExitOk;
}

}  // namespace gradlab::train
