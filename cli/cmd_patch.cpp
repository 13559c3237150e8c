// `gradlab patch`: activation patching. The corrupted prompt is run with one point (or one head
// of it, or one position) taken from the clean prompt's run, and scored by how far that moves
// the answer's logit difference back: 0 is the corrupted run, 1 the clean one.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "autograd/error.h"
#include "autograd/format.h"
#include "cli/checkpoint_args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/input_set_option.h"
#include "cli/options.h"
#include "interp/files/patching_file.h"
#include "interp/patching.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;

struct PatchArgs {
  PatchArgs();
  CheckpointArgs checkpoint{
      "gradlab patch: activation patching from a clean prompt's run into a corrupted one's "
      "(docs/hooks.md)\nOptions"};
  const boost::program_options::options_description& options = checkpoint.options;
  std::string clean, corrupt;
  std::vector<std::string> names;
  bool per_position = false;
  static constexpr InputSetFlags kInputs{
      .prompt = false, .pairs = true, .memory = "a batch's activations"};
  InputSetArgs inputs;  // --data: pairs, scored by their mean logit difference
};

const std::vector<std::string> kDefaultNames = {"*hook_resid_pre", "*hook_attn_out",
                                                "*hook_mlp_out"};

PatchArgs::PatchArgs() {
  checkpoint.options.add_options()(
      "clean", po::value(&clean),
      "the clean prompt: tokens of the checkpoint's task (as --input of predict), or a language "
      "model's text (as --prompt of activations)")(
      "corrupt", po::value(&corrupt),
      "the corrupted prompt, of the same length, whose answer differs")(
      "names", po::value(&names)->multitoken(),
      "hook points to patch: names or globs; default '*hook_resid_pre' '*hook_attn_out' "
      "'*hook_mlp_out' (those the model has); a point with heads (hook_z, hook_q, ...) is patched "
      "head by head")("per-position", po::bool_switch(&per_position),
                      "patch one position at a time (a point's first position axis)");
  add_input_set_options(checkpoint, inputs, kInputs);
  add_output_options(checkpoint,
                     {.help = "also write the results to this (new) HDF5 file", .required = false});
  add_checkpoint_options(checkpoint);
}

int parse_patch(const Arguments& args, PatchArgs& a) {
  CheckpointArgs& c = a.checkpoint;
  if (const int code = parse_with_output("patch", args, c, "the patching results"); code >= 0) {
    return code;
  }
  if (const int code = parse_input_set("patch", c, a.inputs, PatchArgs::kInputs); code >= 0) {
    return code;
  }
  const size_t prompts = c.vm.count("clean") + c.vm.count("corrupt");
  if (a.inputs.given ? prompts != 0 : prompts != 2) {
    return usage_error("patch", "give --clean and --corrupt, or --data (a file of pairs)",
                       c.options);
  }
  return -1;
}

// The metric: at every answer position where the two answers differ, the logit of the clean
// answer's token minus that of the corrupted answer's, summed.
struct LogitDifference {
  std::vector<int64_t> positions, clean_tokens, corrupt_tokens;

  double operator()(const Tensor& logits) const {  // [1, T, V]
    const Tensor values = logits.to(DType::Float64);
    const double* v = values.data<double>();
    const int64_t vocabulary = logits.size(2);
    double total = 0;
    for (size_t i = 0; i < positions.size(); ++i) {
      const double* row = v + positions[i] * vocabulary;
      total += row[clean_tokens[i]] - row[corrupt_tokens[i]];
    }
    return total;
  }
};

LogitDifference logit_difference(const nn::SequenceBatch& clean, const nn::SequenceBatch& corrupt,
                                 bool last_position_only) {
  LogitDifference metric;
  const size_t positions = clean.targets.values.size();
  for (size_t t = last_position_only ? positions - 1 : 0; t < positions; ++t) {
    const int64_t a = clean.targets.values[t], b = corrupt.targets.values[t];
    if (a == nn::kIgnoreTarget || b == nn::kIgnoreTarget || a == b) continue;
    metric.positions.push_back(static_cast<int64_t>(t));
    metric.clean_tokens.push_back(a);
    metric.corrupt_tokens.push_back(b);
  }
  return metric;
}

std::string row_label(const interp::PatchSite& site) {
  return site.point + (site.head >= 0 ? " head " + std::to_string(site.head) : "");
}

// The header of the rows along one position axis: the token each position reads, "clean/corrupt"
// where the two differ.
std::vector<std::string> axis_header(const std::string& axis, const interp::PatchingResults& r,
                                     const PromptedRun& run) {
  const bool source = axis == "S";
  const std::vector<int64_t>& clean = source ? r.clean.source.values : r.clean.inputs.values;
  const std::vector<int64_t>& corrupt = source ? r.corrupt.source.values : r.corrupt.inputs.values;
  std::vector<std::string> header;
  for (size_t i = 0; i < clean.size(); ++i) {
    header.push_back(clean[i] == corrupt[i]
                         ? shown(run, {clean[i]})
                         : shown(run, {clean[i]}) + "/" + shown(run, {corrupt[i]}));
  }
  return header;
}

void print_results(const interp::PatchingResults& r, const PromptedRun& run) {
  size_t width = 5;
  for (const std::string& row : r.rows) width = std::max(width, row.size());
  std::string header_axis = "-";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    if (r.row_axes[i] != header_axis) {
      header_axis = r.row_axes[i];
      const std::string caption = header_axis.empty()  ? ""
                                  : header_axis == "S" ? "source position reads:"
                                                       : "position reads:";
      std::printf("%-*s", static_cast<int>(width), caption.c_str());
      if (header_axis.empty()) {
        std::printf("  %7s", "all");
      } else {
        for (const std::string& token : axis_header(header_axis, r, run)) {
          std::printf("  %7s", token.c_str());
        }
      }
      std::printf("\n");
    }
    std::printf("%-*s", static_cast<int>(width), r.rows[i].c_str());
    for (const double score : r.scores[i]) std::printf("  %7.3f", score);
    std::printf("\n");
  }
}

// The rows of results: one per point, or head of it, holding its sites' metrics normalised (0:
// corrupt, 1: clean) in order.
void fill_rows(interp::PatchingResults& results, const std::vector<interp::PatchSite>& sites,
               const std::vector<nn::HookPointInfo>& points, const std::vector<double>& values,
               double clean, double corrupt) {
  results.clean_difference = clean;
  results.corrupt_difference = corrupt;
  for (size_t i = 0; i < sites.size(); ++i) {
    const std::string label = row_label(sites[i]);
    if (results.rows.empty() || results.rows.back() != label) {
      const auto point = std::find_if(points.begin(), points.end(), [&](const auto& info) {
        return info.name == sites[i].point;
      });
      results.rows.push_back(label);
      results.row_axes.push_back(sites[i].position < 0                  ? ""
                                 : interp::positions_are_source(*point) ? "S"
                                                                        : "T");
      results.scores.emplace_back();
    }
    results.scores.back().push_back((values[i] - corrupt) / (clean - corrupt));
  }
}

// The points --names patches (by default those of kDefaultNames the model has) as sites; returns
// -1, or the usage exit code for names that match no point.
int choose_sites(const PatchArgs& a, const std::vector<nn::HookPointInfo>& points,
                 std::vector<interp::PatchSite>& sites) {
  std::vector<std::string> patterns = a.names;
  if (patterns.empty()) {
    // An attention-only model has no hook_mlp_out: the defaults are the points it has.
    for (const std::string& name : kDefaultNames) {
      const nn::HookFilter filter(name);
      if (std::any_of(points.begin(), points.end(),
                      [&](const nn::HookPointInfo& p) { return filter.matches(p.name); })) {
        patterns.push_back(name);
      }
    }
  }
  std::optional<nn::HookFilter> filter;
  try {
    filter = nn::any_of_points(points, patterns, "--names");
  } catch (const ConfigError& e) {
    return usage_error("patch", e.what(), a.checkpoint.options);
  }
  sites = interp::patch_sites(points, *filter, a.per_position);
  return -1;
}

int run_patch_pairs(const PatchArgs& a);

int run_patch(PatchArgs& a) {
  if (a.inputs.given) return run_patch_pairs(a);
  CheckpointArgs& c = a.checkpoint;
  const train::TrainedModel loaded = load_trained(c);
  std::optional<PromptedRun> clean_run, corrupt_run;
  if (const int code = read_prompt("patch", c, loaded, "--clean", a.clean, clean_run); code >= 0) {
    return code;
  }
  if (const int code = read_prompt("patch", c, loaded, "--corrupt", a.corrupt, corrupt_run);
      code >= 0) {
    return code;
  }
  nn::SequenceModel& model = *clean_run->trained.model;
  interp::PatchingResults results;
  results.clean = answered_batch(*clean_run, results.clean_answer);
  results.corrupt = answered_batch(*corrupt_run, results.corrupt_answer);
  if (results.clean.inputs.shape != results.corrupt.inputs.shape ||
      results.clean.source.shape != results.corrupt.source.shape) {
    return usage_error("patch",
                       "--clean has " + std::to_string(clean_run->prompt.size()) +
                           " tokens and --corrupt " + std::to_string(corrupt_run->prompt.size()) +
                           ": patching needs prompts of the same length",
                       c.options);
  }
  const LogitDifference metric =
      logit_difference(results.clean, results.corrupt, clean_run->text());
  if (metric.positions.empty()) {
    return usage_error("patch",
                       "the model answers both prompts alike (" +
                           shown(*clean_run, results.clean_answer) +
                           "): the corrupted prompt must change the answer",
                       c.options);
  }
  const std::vector<nn::HookPointInfo> points = nn::hook_points(model, results.corrupt);
  std::vector<interp::PatchSite> sites;
  if (const int code = choose_sites(a, points, sites); code >= 0) return code;
  interp::PatchedMetrics differences;
  {
    nn::EvalScope eval(model);
    differences = interp::patch_each(model, results.clean, results.corrupt, sites, metric);
  }
  fill_rows(results, sites, points, differences.patched, differences.clean, differences.corrupt);
  std::printf(
      "clean %s -> %s; corrupted %s -> %s\nlogit difference (clean answer's logit minus the "
      "corrupted answer's, summed over the %zu answer positions where they differ): clean %.4f, "
      "corrupted %.4f\npatched from the clean run (0: the corrupted run, 1: the clean run):\n",
      shown(*clean_run, clean_run->prompt).c_str(), shown(*clean_run, results.clean_answer).c_str(),
      shown(*corrupt_run, corrupt_run->prompt).c_str(),
      shown(*corrupt_run, results.corrupt_answer).c_str(), metric.positions.size(),
      results.clean_difference, results.corrupt_difference);
  print_results(results, *clean_run);
  if (!c.out.empty()) {
    interp::write_patching_file(c.out, results);
    std::printf("wrote %zu rows to %s\n", results.rows.size(), c.out.c_str());
  }
  return kExitOk;
}

// Activation patching over --data's pairs, batch by batch: each run's logit difference summed
// over the pairs, and each site scored by the means (0: the corrupted runs, 1: the clean ones).
int run_patch_pairs(const PatchArgs& a) {
  const CheckpointArgs& c = a.checkpoint;
  std::optional<InputSet> clean, corrupt;
  if (const int code = load_prompt_pairs("patch", c, a.inputs, clean, corrupt); code >= 0) {
    return code;
  }
  if (const int code =
          refuse_unequal_lengths("patch", c, *clean, "the pairs are patched at the same sites");
      code >= 0) {
    return code;
  }
  nn::SequenceModel& model = clean->model();
  interp::PatchingResults results;
  results.clean = rows_of(clean->groups.front().batch, 0, 1);
  results.corrupt = rows_of(corrupt->groups.front().batch, 0, 1);
  results.clean_answer = clean->groups.front().answers.front();
  results.corrupt_answer = corrupt->groups.front().answers.front();
  const std::vector<nn::HookPointInfo> points = nn::hook_points(model, results.corrupt);
  std::vector<interp::PatchSite> sites;
  if (const int code = choose_sites(a, points, sites); code >= 0) return code;
  interp::PatchedMetrics sums{0, 0, std::vector<double>(sites.size(), 0.0)};
  std::string alike;  // the first pair the model answers alike
  {
    nn::EvalScope eval(model);
    // A batch runs the clean and the corrupted rows.
    const int64_t rows = rows_per_batch(a.inputs, 2 * forward_bytes_per_row(*clean));
    for_each_pair_batch(*clean, *corrupt, rows,
                        [&](const nn::SequenceBatch& clean_rows,
                            const nn::SequenceBatch& corrupt_rows, int64_t first) {
                          if (!alike.empty()) return;
                          // Each row's answer positions, at flat positions r * T + t of the batch's
                          // logits.
                          LogitDifference metric;
                          const int64_t T = clean_rows.inputs.shape.at(1);
                          for (int64_t r = 0; r < clean_rows.inputs.shape.at(0); ++r) {
                            const LogitDifference row =
                                logit_difference(rows_of(clean_rows, r, 1),
                                                 rows_of(corrupt_rows, r, 1), clean->text());
                            if (row.positions.empty()) {
                              alike = clean->origins[static_cast<size_t>(first + r)];
                              return;
                            }
                            for (size_t i = 0; i < row.positions.size(); ++i) {
                              metric.positions.push_back(r * T + row.positions[i]);
                              metric.clean_tokens.push_back(row.clean_tokens[i]);
                              metric.corrupt_tokens.push_back(row.corrupt_tokens[i]);
                            }
                          }
                          const interp::PatchedMetrics found =
                              interp::patch_each(model, clean_rows, corrupt_rows, sites, metric);
                          sums.clean += found.clean;
                          sums.corrupt += found.corrupt;
                          for (size_t i = 0; i < sites.size(); ++i)
                            sums.patched[i] += found.patched[i];
                        });
  }
  if (!alike.empty()) {
    return usage_error(
        "patch", alike + ": the model answers both prompts alike; each pair must change the answer",
        c.options);
  }
  const auto pairs = static_cast<double>(clean->examples);
  for (double& value : sums.patched) value /= pairs;
  fill_rows(results, sites, points, sums.patched, sums.clean / pairs, sums.corrupt / pairs);
  std::printf(
      "%s pairs of --data %s: the mean logit difference (clean answer's logit minus the corrupted "
      "answer's, summed over each pair's answer positions where they differ): clean %.4f, "
      "corrupted %.4f\npatched from the clean runs (0: the corrupted runs, 1: the clean runs; the "
      "header shows the first pair):\n",
      format_number(clean->examples).c_str(), a.inputs.data.c_str(), results.clean_difference,
      results.corrupt_difference);
  print_results(results, PromptedRun{clean->trained, {}, 0, 0, std::nullopt});
  if (!c.out.empty()) {
    interp::write_patching_file(c.out, results);
    std::printf("wrote %zu rows to %s\n", results.rows.size(), c.out.c_str());
  }
  return kExitOk;
}

const CommandRow patch_row{"patch",
                           "activation patching: a clean run's activations in a corrupted run",
                           {"--checkpoint", "--names"},
                           parse_patch,
                           run_patch};

}  // namespace

}  // namespace gradlab::cli
