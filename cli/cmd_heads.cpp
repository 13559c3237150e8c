// `gradlab heads`: the previous-token, duplicate-token and induction scores of every attention
// head of a checkpoint's model (interp/head_scores.h), as a table, the heads that look like
// induction heads, and optionally an HDF5 file for scripts/plot_heads.py.
#include <cstdio>

#include "autograd/graph.h"
#include "cli/checkpoint_args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/input_set_option.h"
#include "cli/options.h"
#include "interp/files/head_scores_file.h"
#include "interp/head_scores.h"
#include "nn/hooks.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;

// ARENA's threshold for calling a head an induction head.
constexpr double kInductionThreshold = 0.4;

struct HeadsArgs {
  HeadsArgs() {
    checkpoint.options.add_options()("length", po::value(&scores.length),
                                     "n, the tokens of one copy (the model reads 2n); default as "
                                     "many as its positions allow")(
        "sequences", po::value(&scores.sequences)->default_value(scores.sequences),
        "random sequences the scores are averaged over")(
        "seed", po::value(&scores.seed)->default_value(scores.seed), "seed of the random tokens");
    add_input_set_options(checkpoint, inputs, kInputs);
    add_output_options(
        checkpoint, {.help = "also write the scores to this (new) HDF5 file", .required = false});
    add_checkpoint_options(checkpoint);
  }
  static constexpr InputSetFlags kInputs{.prompt = false, .memory = "a batch's activations"};
  interp::HeadScoreOptions scores;
  InputSetArgs inputs;  // instead of the random sequences: scored by their tokens
  CheckpointArgs checkpoint{
      "gradlab heads: previous-token, duplicate-token and induction scores of every attention "
      "head, on n random tokens repeated twice (docs/hooks.md)\nOptions"};
  const boost::program_options::options_description& options = checkpoint.options;
};

int parse_heads(const Arguments& args, HeadsArgs& a) {
  const CheckpointArgs& c = a.checkpoint;
  if (const int code = parse_with_output("heads", args, a.checkpoint, "head scores"); code >= 0) {
    return code;
  }
  if (c.vm.count("length") && a.scores.length < 2) {
    return usage_error("heads",
                       "--length " + std::to_string(a.scores.length) +
                           ": at least 2 (with one token a copy the induction key is the query)",
                       c.options);
  }
  if (const int code = parse_input_set("heads", a.checkpoint, a.inputs, HeadsArgs::kInputs);
      code >= 0) {
    return code;
  }
  for (const char* flag : {"length", "sequences", "seed"}) {
    if (a.inputs.given && c.vm.count(flag) && !c.vm[flag].defaulted()) {
      return usage_error("heads",
                         "--" + std::string(flag) +
                             " sizes the random sequences, which --data and --held-out replace",
                         c.options);
    }
  }
  if (a.scores.sequences < 1) {
    return usage_error(
        "heads", "--sequences " + std::to_string(a.scores.sequences) + ": at least 1", c.options);
  }
  return -1;
}

// "blocks.1" for blocks.1.attn.hook_pattern, "decoder.0.cross_attn" for its cross-attention.
// "blocks.1.attn.hook_pattern" -> "blocks.1.attn", the attention a head is named by (as
// `gradlab ablate --together blocks.1.attn:0` names it).
std::string attention_of(const std::string& point) {
  return point.substr(0, point.rfind(".hook_pattern"));
}

void print_table(const std::vector<interp::LayerHeadScores>& scores) {
  if (scores.empty()) return;
  std::printf("%-20s", "");
  for (size_t h = 0; h < scores[0].induction.size(); ++h) {
    std::printf("  %7s", ("head " + std::to_string(h)).c_str());
  }
  std::printf("\n");
  const std::pair<const char*, std::vector<double> interp::LayerHeadScores::*> kinds[] = {
      {"previous token", &interp::LayerHeadScores::previous_token},
      {"duplicate token", &interp::LayerHeadScores::duplicate_token},
      {"induction", &interp::LayerHeadScores::induction}};
  for (const interp::LayerHeadScores& point : scores) {
    std::printf("%s\n", point.point.c_str());
    for (const auto& [label, kind] : kinds) {
      std::printf("  %-18s", label);
      for (const double score : point.*kind) std::printf("  %7.2f", score);
      std::printf("\n");
    }
  }
}

// The heads above the threshold, and the ablate command that knocks them out together.
void print_induction_heads(const std::vector<interp::LayerHeadScores>& scores,
                           const std::string& checkpoint) {
  std::string found, names;
  for (const interp::LayerHeadScores& point : scores) {
    for (size_t h = 0; h < point.induction.size(); ++h) {
      if (point.induction[h] <= kInductionThreshold) continue;
      const std::string name = attention_of(point.point) + ":" + std::to_string(h);
      char score[16];
      std::snprintf(score, sizeof score, "%.2f", point.induction[h]);
      found.append(found.empty() ? "" : ", ").append(name).append(" (").append(score).append(")");
      names.append(" ").append(name);
    }
  }
  std::printf("induction heads (induction score above %.1f): %s\n", kInductionThreshold,
              found.empty() ? "none" : found.c_str());
  if (!names.empty()) {
    std::printf("knock them out together: gradlab ablate --checkpoint %s --together%s\n",
                checkpoint.c_str(), names.c_str());
  }
}

// The scores over the data set's sequences, batch by batch.
int data_set_scores(HeadsArgs& a, std::vector<interp::LayerHeadScores>& scores) {
  std::optional<InputSet> set;
  if (const int code = load_input_set("heads", a.checkpoint, a.inputs, set); code >= 0) {
    return code;
  }
  nn::SequenceModel& model = set->model();
  if (!set->groups.front().batch.source.shape.empty()) {
    return usage_error("heads",
                       "--data and --held-out score a decoder's own sequences; " +
                           a.checkpoint.checkpoint +
                           " is an encoder-decoder's (its random sequences score every attention)",
                       a.checkpoint.options);
  }
  interp::HeadScoreReduction reduction;
  {
    NoGradGuard no_grad;
    nn::EvalScope eval(model);
    const int64_t rows = rows_per_batch(a.inputs, forward_bytes_per_row(*set));
    for_each_batch(*set, rows, [&](const InputGroup&, const nn::SequenceBatch& batch, int64_t) {
      const nn::ActivationCache cache =
          nn::run_with_cache(model, batch, "*hook_pattern", {.logits = false});
      std::vector<Tensor> patterns;
      for (const std::string& point : cache.names()) patterns.push_back(cache.at(point));
      reduction.add(cache.names(), patterns, batch.inputs);
    });
  }
  scores = reduction.scores();
  std::printf("head scores of %s over %s, by their tokens\n", a.checkpoint.checkpoint.c_str(),
              described(*set, a.inputs).c_str());
  return -1;
}

int run_heads(HeadsArgs& a) {
  if (a.inputs.given) {
    std::vector<interp::LayerHeadScores> scores;
    if (const int code = data_set_scores(a, scores); code >= 0) return code;
    print_table(scores);
    print_induction_heads(scores, a.checkpoint.checkpoint);
    if (!a.checkpoint.out.empty()) {
      interp::write_head_scores_file(a.checkpoint.out, scores, {.length = 0, .sequences = 0});
      std::printf("wrote the scores of %zu points to %s\n", scores.size(),
                  a.checkpoint.out.c_str());
    }
    return kExitOk;
  }
  const train::TrainedModel trained = load_trained(a.checkpoint);
  nn::SequenceModel& model = *trained.model;
  if (const int64_t limit = interp::max_head_score_length(model); a.scores.length > limit) {
    return usage_error("heads",
                       "--length " + std::to_string(a.scores.length) + " needs " +
                           std::to_string(2 * a.scores.length) + " positions and the model has " +
                           std::to_string(model.config().max_len) + " (--length at most " +
                           std::to_string(limit) + ")",
                       a.checkpoint.options);
  }
  a.scores.length = interp::head_score_length(model, a.scores);
  const std::vector<interp::LayerHeadScores> scores = interp::head_scores(model, a.scores);
  std::printf(
      "head scores of %s: n = %lld random tokens repeated twice, %lld sequences, seed %llu\n",
      a.checkpoint.checkpoint.c_str(), static_cast<long long>(a.scores.length),
      static_cast<long long>(a.scores.sequences), static_cast<unsigned long long>(a.scores.seed));
  print_table(scores);
  print_induction_heads(scores, a.checkpoint.checkpoint);
  if (!a.checkpoint.out.empty()) {
    interp::write_head_scores_file(a.checkpoint.out, scores, a.scores);
    std::printf("wrote the scores of %zu points to %s\n", scores.size(), a.checkpoint.out.c_str());
  }
  return kExitOk;
}

const CommandRow heads_row{"heads",
                           "previous-token, duplicate-token and induction scores of every head",
                           {"--checkpoint", "--sequences", "--length"},
                           parse_heads,
                           run_heads};

}  // namespace

}  // namespace gradlab::cli
