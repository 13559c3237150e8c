// --intervene: the option, its specs parsed, and their hooks on a loaded model.
#include "cli/intervene_option.h"

#include "autograd/error.h"
#include "cli/options.h"

namespace gradlab::cli {

namespace po = boost::program_options;

void add_intervene_option(po::options_description& options, InterveneOption& intervene) {
  options.add_options()(
      "intervene", po::value(&intervene.specs)->composing(),
      "POINT[:HEAD]=zero|mean|project-out:FILE.h5#DATASET|keep:FILE.h5#DATASET: change a hook "
      "point's activation (or one head's slice) in every forward pass; repeatable, applied in "
      "order (docs/hooks.md)");
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

int intervention_hooks(const std::string& command, const InterveneOption& intervene,
                       const nn::SequenceModel& model, const nn::SequenceBatch& heldout,
                       const std::function<void()>& evaluate,
                       const po::options_description& options, std::vector<nn::Hook>& hooks) {
  try {
    hooks = interp::intervention_hooks(model, heldout, intervene.interventions, evaluate);
  } catch (const ConfigError& e) {
    return usage_error(command, e.what(), options);
  }
  return -1;
}

}  // namespace gradlab::cli
