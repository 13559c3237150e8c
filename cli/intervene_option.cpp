// --intervene: the option, its specs parsed, and the interventions applied to a loaded model.
#include "cli/intervene_option.h"

#include "autograd/error.h"
#include "cli/options.h"

namespace gradlab::cli {

namespace po = boost::program_options;

void add_intervene_option(po::options_description& options, InterveneOption& intervene,
                          const std::string& runs) {
  const std::string help =
      "POINT[:HEAD]=zero|mean|resample|value:FILE.h5#DATASET|project-out:FILE.h5#DATASET|"
      "keep:FILE.h5#DATASET|sae:FILE.h5, or PARAM=value:FILE.h5#DATASET: change a hook point's "
      "activation "
      "(or one head's slice), or replace a parameter, in " +
      runs + "; repeatable, applied in order (docs/hooks.md)";
  options.add_options()("intervene", po::value(&intervene.specs)->composing(), help.c_str());
}

int parse_interventions(const std::string& command, InterveneOption& intervene,
                        const po::options_description& options) {
  intervene.interventions.clear();
  try {
    for (const std::string& spec : intervene.specs) {
      intervene.interventions.push_back(interp::parse_intervention(spec));
    }
  } catch (const ConfigError& e) {
    return usage_error(command, e.what(), options);
  }
  return -1;
}

int apply_interventions(const std::string& command, const InterveneOption& intervene,
                        const interp::HeldOutEvaluation<train::Metrics>& set,
                        const po::options_description& options,
                        std::optional<interp::AppliedInterventions>& applied) {
  if (intervene.interventions.empty()) return -1;
  try {
    applied.emplace(set.model, set.heldout, intervene.interventions, [&] { set.evaluate(); });
  } catch (const ConfigError& e) {
    return usage_error(command, e.what(), options);
  }
  return -1;
}

int apply_interventions(const std::string& command, const InterveneOption& intervene,
                        const train::TrainedModel& trained, const po::options_description& options,
                        std::optional<interp::AppliedInterventions>& applied) {
  if (intervene.interventions.empty()) return -1;
  const std::unique_ptr<train::Trainer> trainer = train::scoring_trainer(trained);
  const interp::HeldOutEvaluation<train::Metrics> set{trainer->model(), trainer->heldout(),
                                                      [&trainer] { return trainer->evaluate(); }};
  return apply_interventions(command, intervene, set, options, applied);
}

}  // namespace gradlab::cli
