// `gradlab dla`: direct logit attribution (interp/direct_logit_attribution.h): each part of the
// residual stream's share of the answer's logit (or of a logit difference), for one prompt or
// reduced over a data set (--data, --held-out), printed largest first and optionally written to
// HDF5.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <optional>
#include <stdexcept>

#include "autograd/error.h"
#include "autograd/format.h"
#include "cli/checkpoint_args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/input_set_option.h"
#include "cli/intervene_option.h"
#include "cli/options.h"
#include "interp/direct_logit_attribution.h"
#include "interp/files/dla_file.h"
#include "train/trained_model.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;

struct DlaArgs {
  DlaArgs() {
    add_input_set_options(checkpoint, inputs, kInputs);
    checkpoint.options.add_options()(
        "answer", po::value(&dla.answer),
        "the token id whose logit is attributed; default each row's target at the position (for "
        "a prompt, the model's answer)")(
        "versus", po::value(&dla.versus),
        "attribute the logit difference: the answer's logit minus this token id's")(
        "position", po::value(&position)->default_value("answer"),
        "the position read: a number, or answer (each row's first position with a target: where "
        "a toy task's answer is predicted)")(
        "fold-ln", po::bool_switch(&dla.fold_ln),
        "TransformerLens's convention: the final LayerNorm's weight folded into W_U and its bias "
        "into b_U (no ln_final_bias part)")("top", po::value(&top)->default_value(20),
                                            "parts printed, largest first");
    add_intervene_option(checkpoint.options, intervene, "the attributed run");
    add_output_options(checkpoint, {.help = "also write the attribution to this (new) HDF5 file",
                                    .required = false});
    add_checkpoint_options(checkpoint);
  }
  CheckpointArgs checkpoint{
      "gradlab dla: direct logit attribution: each part of the residual stream (embeddings, "
      "heads, output biases, feed-forwards) read through the frozen final norm and the "
      "unembedding, for one prompt or over held-out rows (docs/commands.md)\nOptions"};
  const boost::program_options::options_description& options = checkpoint.options;
  static constexpr InputSetFlags kInputs{.memory = "a batch's activations"};
  InputSetArgs inputs;  // a data set is reduced to the mean and standard deviation per part
  interp::DlaOptions dla;
  std::string position = "answer";
  int64_t top = 20;
  InterveneOption intervene;
};

int parse_dla(const Arguments& args, DlaArgs& a) {
  CheckpointArgs& c = a.checkpoint;
  if (const int code = parse_with_output("dla", args, c, "the attribution"); code >= 0) {
    return code;
  }
  if (const int code = parse_input_set("dla", c, a.inputs, DlaArgs::kInputs); code >= 0) {
    return code;
  }
  if (a.top < 1) return usage_error("dla", "--top must be at least 1", a.options);
  if (const int code = parse_interventions("dla", a.intervene, a.options); code >= 0) return code;
  for (const char* flag : {"answer", "versus"}) {
    const int64_t token = flag == std::string("answer") ? a.dla.answer : a.dla.versus;
    if (c.vm.count(flag) && token < 0) {
      return usage_error("dla",
                         "--" + std::string(flag) + " " + format_number(token) + ": not a token id",
                         a.options);
    }
  }
  if (a.position != "answer") {
    try {
      size_t used = 0;
      a.dla.position = std::stoll(a.position, &used);
      if (used != a.position.size() || a.dla.position < 0) throw std::invalid_argument("");
    } catch (const std::exception&) {
      return usage_error("dla",
                         "--position " + quote(a.position) + ": a position (0, 1, ...) or answer",
                         a.options);
    }
  }
  return -1;
}

// The usage error for a --position, --answer or --versus outside the model's sequence
// (positions) or vocabulary, or -1.
int check_ranges(const DlaArgs& a, int64_t positions, int64_t vocab) {
  const std::string limit = " (the model reads " + format_number(positions) + " positions here)";
  if (a.dla.position >= positions) {
    return usage_error("dla", "--position " + a.position + " is past the last position" + limit,
                       a.options);
  }
  for (const int64_t token : {a.dla.answer, a.dla.versus}) {
    if (token >= vocab) {
      return usage_error(
          "dla",
          "token " + format_number(token) + " is not an id in [0, " + format_number(vocab) + ")",
          a.options);
    }
  }
  return -1;
}

// s as a table, largest first; `rows` names what s.rows counts ("prompt", "held-out row").
void print_summary(const interp::DlaSummary& s, int64_t top, const std::string& what,
                   const std::string& rows) {
  std::vector<size_t> order(s.labels.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return std::abs(s.mean[x]) > std::abs(s.mean[y]); });
  const double total = std::accumulate(s.mean.begin(), s.mean.end(), 0.0);
  std::printf(
      "direct logit attribution of %s over %lld %s%s: the model's %.6f, the parts' sum %.6f\n",
      what.c_str(), static_cast<long long>(s.rows), rows.c_str(), s.rows == 1 ? "" : "s",
      s.logit_mean, total);
  size_t width = 4;
  for (const std::string& label : s.labels) width = std::max(width, label.size());
  std::printf("%-*s  %12s%s\n", static_cast<int>(width), "part", "contribution",
              s.rows > 1 ? "           std" : "");
  const size_t shown_rows = std::min(order.size(), static_cast<size_t>(top));
  for (size_t i = 0; i < shown_rows; ++i) {
    const size_t n = order[i];
    std::printf("%-*s  %12.6f", static_cast<int>(width), s.labels[n].c_str(), s.mean[n]);
    if (s.rows > 1) std::printf("  %12.6f", s.std[n]);
    std::printf("\n");
  }
  if (shown_rows < order.size()) {
    std::printf("(%zu more parts: --top shows more)\n", order.size() - shown_rows);
  }
}

int run_dla(DlaArgs& a) {
  const CheckpointArgs& c = a.checkpoint;
  const std::string what = a.dla.versus >= 0 ? "the logit difference" : "the logit";
  std::optional<InputSet> set;
  if (const int code = load_input_set("dla", c, a.inputs, set); code >= 0) return code;
  nn::SequenceModel& model = set->model();
  for (const InputGroup& group : set->groups) {
    if (const int code = check_ranges(a, group.batch.inputs.shape.at(1), model.config().vocab_size);
        code >= 0) {
      return code;
    }
  }
  interp::DlaReduction reduction;
  const int64_t rows = rows_per_batch(a.inputs, forward_bytes_per_row(*set));
  std::optional<interp::AppliedInterventions> applied;
  if (const int code = apply_interventions("dla", a.intervene, set->trained, a.options, applied);
      code >= 0) {
    return code;
  }
  {
    nn::EvalScope eval(model);
    for_each_batch(*set, rows, [&](const InputGroup&, const nn::SequenceBatch& batch, int64_t) {
      reduction.add(interp::direct_logit_attribution(model, batch, a.dla));
    });
  }
  const interp::DlaSummary summary = reduction.summary();
  print_summary(summary, a.top, what, c.vm.count("held-out") ? "held-out row" : "prompt");
  if (!c.out.empty()) {
    const InputGroup& first = set->groups.front();
    interp::write_dla_file(c.out, summary, a.dla, set->prompt ? &first.batch : nullptr,
                           first.answers.front());
    std::printf("wrote the attribution of %zu parts to %s\n", summary.labels.size(), c.out.c_str());
  }
  return kExitOk;
}

const CommandRow dla_row{"dla",
                         "direct logit attribution: each head's and layer's share of a logit",
                         {"--checkpoint", "--held-out"},
                         parse_dla,
                         run_dla};

}  // namespace

}  // namespace gradlab::cli
