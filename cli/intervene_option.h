// The --intervene option group (repeatable): interventions on a checkpoint's forward passes for
// the commands that run one (interp/intervention.h), parsed with the command line and turned into
// hooks once the model is loaded, each bad spec a usage error.
#pragma once

#include <boost/program_options.hpp>
#include <string>
#include <vector>

#include "interp/intervention.h"

namespace gradlab::cli {

struct InterveneOption {
  std::vector<std::string> specs;                   // as given, in order
  std::vector<interp::Intervention> interventions;  // parsed by parse_interventions
};

// Adds --intervene SPEC, repeatable.
void add_intervene_option(boost::program_options::options_description& options,
                          InterveneOption& intervene);

// Parses every spec (reading its subspace file): -1, or 2 after the usage error naming the spec.
int parse_interventions(const std::string& command, InterveneOption& intervene,
                        const boost::program_options::options_description& options);

// The hooks of the interventions on model (matched against its points; means read by one run of
// evaluate): -1 with hooks set, or 2 after the usage error for a point, head or subspace that
// does not fit this model.
int intervention_hooks(const std::string& command, const InterveneOption& intervene,
                       const nn::SequenceModel& model, const nn::SequenceBatch& heldout,
                       const std::function<void()>& evaluate,
                       const boost::program_options::options_description& options,
                       std::vector<nn::Hook>& hooks);

}  // namespace gradlab::cli
