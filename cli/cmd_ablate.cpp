// `gradlab ablate`: every head of every layer, and every feed-forward sublayer, knocked out in
// turn (interp/ablation.h), scored on the held-out set against the intact model: a table of
// layers by heads on stdout and, with --out, a CSV for scripts/plot_ablation.py.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <sstream>

#include "autograd/kinds.h"
#include "cli/checkpoint_args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "interp/ablation.h"
#include "io/atomic_file.h"
#include "train/trainer.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;

struct AblateArgs {
  AblateArgs() {
    const std::string modes = "how a part is knocked out: " + names_of(interp::ablation_modes()) +
                              " (zero: its output set to zero; mean: to its mean over the "
                              "held-out sequences, at each position)";
    checkpoint.options.add_options()("mode", po::value(&mode)->default_value("zero"),
                                     modes.c_str())(
        "data", po::value(&data), "a language model: score on every token of this file instead")(
        "together", po::value(&together)->multitoken(),
        "also knock out these parts all at once, in the table's names: blocks.1.attn:2 (a "
        "head), blocks.1.attn:0,2 or blocks.1.attn:* (heads), blocks.1.ffn (a feed-forward "
        "sublayer)");
    add_output_options(
        checkpoint, {.help = "also write the table as CSV to this (new) file", .required = false});
    add_checkpoint_options(checkpoint);
  }
  CheckpointArgs checkpoint{
      "gradlab ablate: the held-out loss and accuracy with each head and each feed-forward "
      "sublayer knocked out in turn (docs/hooks.md)\nOptions"};
  const boost::program_options::options_description& options = checkpoint.options;
  std::string mode = "zero";
  std::string data;
  std::vector<std::string> together;
};

int parse_ablate(const Arguments& args, AblateArgs& a) {
  const int code = parse_with_output("ablate", args, a.checkpoint, "the ablation table");
  if (code >= 0) return code;
  if (const int data = check_input_file("ablate", "--data", a.data, a.checkpoint.options);
      data >= 0) {
    return data;
  }
  try {
    row_named(interp::ablation_modes(), a.mode, "ablation mode", "--mode: ");
  } catch (const ConfigError& e) {
    return usage_error("ablate", e.what(), a.checkpoint.options);
  }
  return -1;
}

using AblatedPart = interp::AblatedPart<train::Metrics>;
using AblationResults = interp::AblationResults<train::Metrics>;

// What the ablation scores: the trainer's held-out evaluation.
interp::HeldOutEvaluation<train::Metrics> heldout_evaluation(train::Trainer& trainer) {
  return {trainer.model(), trainer.heldout(), [&trainer] { return trainer.evaluate(); }};
}

// The row of the table a part belongs to: its attention ("blocks.1.attn"), or for a
// feed-forward sublayer its block's self-attention ("blocks.1.hook_mlp_out" -> "blocks.1.attn").
std::string table_row(const AblatedPart& part) {
  const std::string module = part.point.substr(0, part.point.rfind('.'));
  return part.head >= 0 ? module : module + ".attn";
}

// A part as --together names it: "blocks.1.attn:2" or "blocks.1.ffn".
std::string part_name(const interp::ModelPart& part) {
  const std::string module = part.point.substr(0, part.point.rfind('.'));
  return part.head >= 0 ? module + ":" + std::to_string(part.head) : module + ".ffn";
}

// The parts one --together entry names (a list or * of heads after the colon); a ConfigError
// naming the model's parts if it names none.
std::vector<interp::ModelPart> parts_named(const std::string& entry,
                                           const std::vector<interp::ModelPart>& all) {
  const size_t colon = entry.find(':');
  const std::string module = entry.substr(0, colon);
  std::vector<std::string> heads;  // empty: a feed-forward sublayer
  if (colon != std::string::npos) {
    std::stringstream list(entry.substr(colon + 1));
    for (std::string head; std::getline(list, head, ',');) heads.push_back(head);
  }
  std::vector<interp::ModelPart> named;
  for (const interp::ModelPart& part : all) {
    const std::string name = part_name(part);
    const bool head_of_module = part.head >= 0 && name.substr(0, name.rfind(':')) == module;
    const bool wanted =
        heads.empty() ? colon == std::string::npos && name == module
                      : head_of_module && std::any_of(heads.begin(), heads.end(), [&](auto& h) {
                          return h == "*" || h == std::to_string(part.head);
                        });
    if (wanted) named.push_back(part);
  }
  if (named.empty() || (colon != std::string::npos && heads.empty())) {
    std::string names;
    for (const interp::ModelPart& part : all) names.append(" ").append(part_name(part));
    throw ConfigError("--together: " + quote(entry) +
                      " names no part of this model; its parts:" + names);
  }
  return named;
}

// One table of layers by heads (and ffn) of metric, printed with the intact value.
void print_table(const char* title, double intact, const AblationResults& results,
                 const std::function<double(const train::Metrics&)>& metric) {
  std::vector<std::string> rows;
  std::map<std::string, std::map<int64_t, double>> cells;  // row -> head (-1: ffn) -> value
  int64_t heads = 0;
  for (const AblatedPart& part : results.parts) {
    const std::string row = table_row(part);
    if (!cells.count(row)) rows.push_back(row);
    cells[row][part.head] = metric(part.metrics);
    heads = std::max(heads, part.head + 1);
  }
  size_t width = 5;
  for (const std::string& row : rows) width = std::max(width, row.size());
  std::printf("\n%s with one part knocked out (the intact model: %.4f)\n%-*s", title, intact,
              static_cast<int>(width), "");
  for (int64_t head = 0; head < heads; ++head) {
    std::printf("  %8s", ("head " + std::to_string(head)).c_str());
  }
  std::printf("  %8s\n", "ffn");
  for (const std::string& row : rows) {
    std::printf("%-*s", static_cast<int>(width), row.c_str());
    for (int64_t head = 0; head <= heads; ++head) {
      const auto cell = cells[row].find(head < heads ? head : -1);  // heads, then ffn
      if (cell == cells[row].end()) {
        std::printf("  %8s", "");
      } else {
        std::printf("  %8.4f", cell->second);
      }
    }
    std::printf("\n");
  }
}

// The --together parts, as printed and as the CSV's point of their row (with "together: "
// before them): "blocks.1.attn:0 blocks.1.attn:1".
std::string names_of_parts(const std::vector<interp::ModelPart>& parts) {
  std::string names;
  for (const interp::ModelPart& part : parts) {
    names.append(names.empty() ? "" : " ").append(part_name(part));
  }
  return names;
}

std::string csv(const AblationResults& results, const train::Metrics& intact,
                const std::optional<AblatedPart>& together) {
  std::ostringstream out;
  out.precision(9);
  // The losses of the held-out set's parts (induction: the two copies) follow, a column each.
  const auto part_losses = [&](const train::Metrics& m) {
    for (const train::PartLoss& part : m.parts) out << ',' << part.loss;
    out << '\n';
  };
  out << "point,head,loss,token_accuracy,exact_match,loss_increase";
  for (const train::PartLoss& part : intact.parts) out << ',' << part.name << "_loss";
  out << '\n';
  out << "intact,," << intact.loss << ',' << intact.token_accuracy << ',' << intact.exact_match
      << ",0";
  part_losses(intact);
  std::vector<AblatedPart> rows = results.parts;
  if (together) rows.push_back(*together);
  for (const AblatedPart& part : rows) {
    const train::Metrics& m = part.metrics;
    out << part.point << ',' << (part.head >= 0 ? std::to_string(part.head) : "") << ',' << m.loss
        << ',' << m.token_accuracy << ',' << m.exact_match << ',' << m.loss - intact.loss;
    part_losses(m);
  }
  return out.str();
}

int run_ablate(AblateArgs& a) {
  if (const int code = check_text_flag("ablate", a.checkpoint.checkpoint, "--data", a.data,
                                       a.checkpoint.options);
      code >= 0) {
    return code;
  }
  const train::TrainedModel trained = load_trained(a.checkpoint);
  const std::unique_ptr<train::Trainer> trainer = train::scoring_trainer(trained, a.data);
  const data::Task* task = trained.task.get();
  const interp::AblationModeRow& mode =
      row_named(interp::ablation_modes(), a.mode, "ablation mode", "--mode: ");
  std::vector<interp::ModelPart> together;
  try {
    const std::vector<interp::ModelPart> all =
        interp::model_parts(trainer->model(), trainer->heldout());
    for (const std::string& entry : a.together) {
      for (const interp::ModelPart& part : parts_named(entry, all)) {
        const auto same = [&](const interp::ModelPart& p) {
          return p.point == part.point && p.head == part.head;
        };
        if (std::none_of(together.begin(), together.end(), same)) together.push_back(part);
      }
    }
  } catch (const ConfigError& e) {
    return usage_error("ablate", e.what(), a.checkpoint.options);
  }
  const AblationResults results = interp::ablate_each_part(heldout_evaluation(*trainer), mode.id);
  const train::Metrics& intact = results.intact;
  const bool sequences = task->language_model() == nullptr;  // whole answers to match
  const std::string accuracy = task->accuracy_name();
  std::printf("checkpoint %s (task %s, %lld held-out sequences); %s ablation: %s\n",
              a.checkpoint.checkpoint.c_str(), task->name().c_str(),
              static_cast<long long>(trainer->heldout().inputs.shape[0]), mode.name,
              mode.description);
  std::printf("intact model: loss %.6f, %s %.4f", intact.loss, accuracy.c_str(),
              intact.token_accuracy);
  if (sequences) std::printf(", exact match %.4f", intact.exact_match);
  std::printf("\n");
  print_table("held-out loss", intact.loss, results, &train::Metrics::loss);
  print_table(accuracy.c_str(), intact.token_accuracy, results, &train::Metrics::token_accuracy);
  if (sequences) {
    print_table("exact match", intact.exact_match, results, &train::Metrics::exact_match);
  }
  for (size_t i = 0; i < intact.parts.size(); ++i) {
    const std::string title = "held-out " + intact.parts[i].name + " loss";
    print_table(title.c_str(), intact.parts[i].loss, results,
                [i](const train::Metrics& m) { return m.parts[i].loss; });
  }
  const AblatedPart* most = nullptr;
  for (const AblatedPart& part : results.parts) {
    if (!most || part.metrics.loss > most->metrics.loss) most = &part;
  }
  if (most) {
    std::printf("\nthe most important part: %s (loss %.4f -> %.4f)\n", part_name(*most).c_str(),
                intact.loss, most->metrics.loss);
  }
  std::optional<AblatedPart> set;  // the --together parts, as one row
  if (!together.empty()) {
    set = AblatedPart{{"together: " + names_of_parts(together), -1},
                      interp::ablate_together(heldout_evaluation(*trainer), mode.id, together)};
    const train::Metrics& m = set->metrics;
    std::printf("\nknocked out together: %s\n  loss %.4f -> %.4f, %s %.4f -> %.4f",
                names_of_parts(together).c_str(), intact.loss, m.loss, accuracy.c_str(),
                intact.token_accuracy, m.token_accuracy);
    if (sequences) std::printf(", exact match %.4f -> %.4f", intact.exact_match, m.exact_match);
    for (size_t i = 0; i < intact.parts.size(); ++i) {
      std::printf(", %s loss %.4f -> %.4f", intact.parts[i].name.c_str(), intact.parts[i].loss,
                  m.parts[i].loss);
    }
    std::printf("\n");
  }
  if (!a.checkpoint.out.empty()) {
    io::replace_file_text(a.checkpoint.out, csv(results, intact, set));
    std::printf("wrote the table to %s\n", a.checkpoint.out.c_str());
  }
  return kExitOk;
}

const CommandRow ablate_row{"ablate",
                            "held-out metrics with each head and ffn knocked out in turn",
                            {"--checkpoint", "--data"},
                            parse_ablate,
                            run_ablate};

}  // namespace

}  // namespace gradlab::cli
