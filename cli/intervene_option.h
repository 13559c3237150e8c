// The --intervene option group (repeatable): interventions on a checkpoint's forward passes for
// the commands that run one (interp/intervention.h), parsed with the command line and turned into
// interventions applied once the model is loaded, each bad spec a usage error.
#pragma once

#include <boost/program_options.hpp>
#include <optional>
#include <string>
#include <vector>

#include "interp/ablation.h"
#include "interp/intervention.h"
#include "train/trained_model.h"
#include "train/trainer.h"

namespace gradlab::cli {

struct InterveneOption {
  std::vector<std::string> specs;                   // as given, in order
  std::vector<interp::Intervention> interventions;  // parsed by parse_interventions
};

// Adds --intervene SPEC, repeatable; `runs` says which of the command's runs it changes.
void add_intervene_option(boost::program_options::options_description& options,
                          InterveneOption& intervene,
                          const std::string& runs = "every forward pass");

// Parses every spec (reading its subspace file): -1, or 2 after the usage error naming the spec.
int parse_interventions(const std::string& command, InterveneOption& intervene,
                        const boost::program_options::options_description& options);

// The interventions applied to the model of `set` for as long as `applied` lives (means and
// resampled activations read by one run of set.evaluate): -1, or 2 after the usage error for a
// point, head, parameter or array that does not fit this model. Nothing is applied without specs.
int apply_interventions(const std::string& command, const InterveneOption& intervene,
                        const interp::HeldOutEvaluation<train::Metrics>& set,
                        const boost::program_options::options_description& options,
                        std::optional<interp::AppliedInterventions>& applied);

// The same on the checkpoint's own held-out set (train::scoring_trainer), for the commands that
// run a model on a prompt of their own.
int apply_interventions(const std::string& command, const InterveneOption& intervene,
                        const train::TrainedModel& trained,
                        const boost::program_options::options_description& options,
                        std::optional<interp::AppliedInterventions>& applied);

}  // namespace gradlab::cli
