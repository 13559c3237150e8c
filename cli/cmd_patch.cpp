// `gradlab patch`: activation patching. The corrupted prompt is run with one point (or one head
// of it, or one position) taken from the clean prompt's run, and scored by how far that moves
// the answer's logit difference back: 0 is the corrupted run, 1 the clean one. With --method
// attribution, every site's score is estimated from one backward pass, and the top sites patched.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/kinds.h"
#include "autograd/ops.h"
#include "cli/checkpoint_args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/input_set_option.h"
#include "cli/intervene_option.h"
#include "cli/options.h"
#include "interp/attribution_patching.h"
#include "interp/files/attribution_patching_file.h"
#include "interp/files/patching_file.h"
#include "interp/patching.h"
#include "interp/path_patching.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;

enum class PatchMethod { Activation, Attribution };

struct PatchMethodRow {
  const char* name;
  PatchMethod id;
};

const std::vector<PatchMethodRow> kPatchMethods = {{"activation", PatchMethod::Activation},
                                                   {"attribution", PatchMethod::Attribution}};

struct PatchArgs {
  PatchArgs();
  CheckpointArgs checkpoint{
      "gradlab patch: activation patching (or its first-order estimate, attribution patching) from "
      "a clean prompt's run into a corrupted one's (docs/hooks.md)\nOptions"};
  const boost::program_options::options_description& options = checkpoint.options;
  std::string clean, corrupt;
  std::vector<std::string> names;
  bool per_position = false;
  std::string path;
  std::string method = "activation";
  PatchMethod method_id = PatchMethod::Activation;
  std::optional<int64_t> top;  // --top as given
  static constexpr InputSetFlags kInputs{
      .prompt = false, .pairs = true, .memory = "a batch's activations"};
  InputSetArgs inputs;  // --data: pairs, scored by their mean logit difference
  InterveneOption intervene;
};

const int64_t kDefaultTop = 10;

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
                      "patch one position at a time (a point's first position axis)")(
      "path", po::value(&path),
      "path patching instead: 'SENDERS -> RECEIVERS', senders heads LAYER.HEAD or LAYER.mlp, "
      "receivers LAYER.HEAD.q|k|v, LAYER.HEAD (all three), LAYER.mlp or logits, each side "
      "comma-separated (docs/circuits.md)")(
      "method", po::value(&method)->default_value(method),
      ("how to patch, " + names_of(kPatchMethods) +
       ": activation patches each site in turn; attribution estimates every site at once, "
       "(clean - corrupt) . gradient of the corrupted run, then patches the --top sites it ranks "
       "highest to compare (docs/circuits.md)")
          .c_str())(
      "top", po::value<int64_t>()->notifier([this](int64_t k) { top = k; }),
      ("with --method attribution: the number of sites, ranked by the estimate, to patch exactly "
       "(default " +
       std::to_string(kDefaultTop) + ")")
          .c_str());
  add_input_set_options(checkpoint, inputs, kInputs);
  add_intervene_option(checkpoint.options, intervene,
                       "the clean and the corrupted runs alike, patched or not");
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
  try {
    a.method_id = row_named(kPatchMethods, a.method, "patching method", "--method: ").id;
  } catch (const ConfigError& e) {
    return usage_error("patch", e.what(), a.checkpoint.options);
  }
  if (a.top && a.method_id != PatchMethod::Attribution) {
    return usage_error("patch",
                       "--top ranks the sites of --method attribution; --method is " + a.method,
                       a.checkpoint.options);
  }
  if (a.top && *a.top < 1) {
    return usage_error("patch", "--top " + std::to_string(*a.top) + ": patch at least one site",
                       a.checkpoint.options);
  }
  if (!a.path.empty() && a.method_id != PatchMethod::Activation) {
    return usage_error("patch", "--path patches a path exactly: it takes no --method " + a.method,
                       a.checkpoint.options);
  }
  if (a.inputs.given && (!a.path.empty() || a.method_id != PatchMethod::Activation)) {
    return usage_error("patch",
                       "--data averages activation patching over pairs; --path and --method "
                       "attribution take one pair, --clean and --corrupt",
                       c.options);
  }
  return parse_interventions("patch", a.intervene, a.options);
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

  // The same sum in the autograd graph, for attribution patching: logits times weights of +1
  // (the clean answer's token) and -1 (the corrupted answer's) at the answer positions.
  Tensor differentiable(const Tensor& logits) const {  // [1, T, V]
    std::vector<double> weights(static_cast<size_t>(logits.numel()), 0.0);
    const int64_t vocabulary = logits.size(2);
    for (size_t i = 0; i < positions.size(); ++i) {
      weights[static_cast<size_t>(positions[i] * vocabulary + clean_tokens[i])] += 1;
      weights[static_cast<size_t>(positions[i] * vocabulary + corrupt_tokens[i])] -= 1;
    }
    return sum(logits * Tensor::from_vector(weights, logits.shape(), logits.dtype()));
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

// --path: the one score of the path from the senders to the receivers, the rest of the
// command's output as for activation patching (--out writes one row, the path).
int run_path_patch(PatchArgs& a, nn::SequenceModel& model, interp::PatchingResults& results,
                   const LogitDifference& metric) {
  CheckpointArgs& c = a.checkpoint;
  if (!a.names.empty() || a.per_position) {
    return usage_error("patch", "--path patches a path: it takes no --names nor --per-position",
                       c.options);
  }
  interp::PathPatchResult path;
  try {
    const interp::PathSpec spec =
        interp::parse_path(a.path, nn::hook_points(model, results.corrupt));
    nn::EvalScope eval(model);
    path = interp::patch_path(model, results.clean, results.corrupt, spec, metric);
  } catch (const ConfigError& e) {
    return usage_error("patch", e.what(), c.options);
  }
  results.clean_difference = path.clean;
  results.corrupt_difference = path.corrupt;
  results.rows = {"path " + a.path};
  results.row_axes = {""};
  results.scores = {{path.score()}};
  std::printf(
      "logit difference (clean answer's logit minus the corrupted answer's, summed over the %zu "
      "answer positions where they differ): clean %.4f, corrupted %.4f\npath %s, the senders' "
      "clean outputs reaching the receivers alone (0: the corrupted run, 1: the clean run): "
      "%.3f\n",
      metric.positions.size(), path.clean, path.corrupt, a.path.c_str(), path.score());
  if (!c.out.empty()) {
    interp::write_patching_file(c.out, results);
    std::printf("wrote the path's score to %s\n", c.out.c_str());
  }
  return kExitOk;
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

void print_runs(const interp::PatchingResults& results, const LogitDifference& metric,
                const PromptedRun& clean_run, const PromptedRun& corrupt_run) {
  std::printf(
      "clean %s -> %s; corrupted %s -> %s\nlogit difference (clean answer's logit minus the "
      "corrupted answer's, summed over the %zu answer positions where they differ): clean %.4f, "
      "corrupted %.4f\n",
      shown(clean_run, clean_run.prompt).c_str(), shown(clean_run, results.clean_answer).c_str(),
      shown(corrupt_run, corrupt_run.prompt).c_str(),
      shown(corrupt_run, results.corrupt_answer).c_str(), metric.positions.size(),
      results.clean_difference, results.corrupt_difference);
}

// Attribution patching: every site estimated from one backward pass of the corrupted run, then
// the --top sites the estimates rank highest patched exactly, side by side.
int run_attribution(const PatchArgs& a, const std::vector<interp::PatchSite>& sites,
                    const LogitDifference& metric, const std::vector<nn::HookPointInfo>& points,
                    const PromptedRun& clean_run, const PromptedRun& corrupt_run,
                    interp::PatchingResults& estimates) {
  nn::SequenceModel& model = *clean_run.trained.model;
  nn::EvalScope eval(model);
  const interp::AttributedMetrics attributed =
      interp::attribute_each(model, estimates.clean, estimates.corrupt, sites,
                             [&](const Tensor& logits) { return metric.differentiable(logits); });
  fill_rows(estimates, sites, points, attributed.estimated, attributed.clean, attributed.corrupt);
  print_runs(estimates, metric, clean_run, corrupt_run);
  std::printf(
      "attribution patching, (clean - corrupt) . gradient of the corrupted run, estimated (0: the "
      "corrupted run, 1: the clean run):\n");
  print_results(estimates, clean_run);

  interp::AttributionPatchingResults results;
  results.estimates = estimates;
  const std::vector<size_t> top = interp::top_indices(
      attributed.estimated, attributed.corrupt, static_cast<size_t>(a.top.value_or(kDefaultTop)));
  std::vector<interp::PatchSite> top_sites;
  for (const size_t i : top) top_sites.push_back(sites[i]);
  const interp::PatchedMetrics exact =
      interp::patch_each(model, estimates.clean, estimates.corrupt, top_sites, metric);
  size_t width = 4;
  for (const interp::PatchSite& site : top_sites) width = std::max(width, row_label(site).size());
  std::printf("exact patching of the %zu sites the estimates rank highest:\n%-*s  %8s  %11s  %7s\n",
              top.size(), static_cast<int>(width), "site", "position", "attribution", "exact");
  for (size_t k = 0; k < top.size(); ++k) {
    const interp::PatchSite& site = top_sites[k];
    results.top_rows.push_back(row_label(site));
    results.top_positions.push_back(site.position);
    results.top_attribution.push_back((attributed.estimated[top[k]] - attributed.corrupt) /
                                      (attributed.clean - attributed.corrupt));
    results.top_exact.push_back((exact.patched[k] - exact.corrupt) / (exact.clean - exact.corrupt));
    std::printf("%-*s  %8s  %11.3f  %7.3f\n", static_cast<int>(width),
                results.top_rows.back().c_str(),
                site.position < 0 ? "all" : std::to_string(site.position).c_str(),
                results.top_attribution.back(), results.top_exact.back());
  }
  results.correlation = interp::correlation(results.top_attribution, results.top_exact);
  std::printf("correlation of attribution and exact patching over these %zu sites: %.3f\n",
              top.size(), results.correlation);
  if (!a.checkpoint.out.empty()) {
    interp::write_attribution_patching_file(a.checkpoint.out, results);
    std::printf("wrote %zu rows and %zu top sites to %s\n", estimates.rows.size(), top.size(),
                a.checkpoint.out.c_str());
  }
  return kExitOk;
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
  std::optional<interp::AppliedInterventions> applied;
  if (const int code =
          apply_interventions("patch", a.intervene, clean_run->trained, c.options, applied);
      code >= 0) {
    return code;
  }
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
  if (!a.path.empty()) return run_path_patch(a, model, results, metric);
  const std::vector<nn::HookPointInfo> points = nn::hook_points(model, results.corrupt);
  std::vector<interp::PatchSite> sites;
  if (const int code = choose_sites(a, points, sites); code >= 0) return code;
  if (a.method_id == PatchMethod::Attribution) {
    return run_attribution(a, sites, metric, points, *clean_run, *corrupt_run, results);
  }
  interp::PatchedMetrics differences;
  {
    nn::EvalScope eval(model);
    differences = interp::patch_each(model, results.clean, results.corrupt, sites, metric);
  }
  fill_rows(results, sites, points, differences.patched, differences.clean, differences.corrupt);
  print_runs(results, metric, *clean_run, *corrupt_run);
  std::printf("patched from the clean run (0: the corrupted run, 1: the clean run):\n");
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
  std::optional<interp::AppliedInterventions> applied;
  if (const int code =
          apply_interventions("patch", a.intervene, clean->trained, c.options, applied);
      code >= 0) {
    return code;
  }
  interp::PatchingResults results;
  results.clean = nn::rows_of(clean->groups.front().batch, 0, 1);
  results.corrupt = nn::rows_of(corrupt->groups.front().batch, 0, 1);
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
                                logit_difference(nn::rows_of(clean_rows, r, 1),
                                                 nn::rows_of(corrupt_rows, r, 1), clean->text());
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
